"""Reads with a deadline, one worker thread per device: a hung NVML call never stops another GPU.

A driver can stop answering: an NVML call then blocks (for seconds, or until the GPU is reset).
Every per-device NVML read therefore runs in that device's own worker thread (a
``DeadlineReader`` per kind of read: the fast tick, GPM, PCIe, opening the GPUs, topology,
``read_once``), and the caller waits for the workers only as long as it chooses (``wait_s``),
then uses what it has. A call that has not returned ``deadline_s`` after it began makes its
device "not responding"; its worker is left in the call and the device is not asked again until
the call returns, when it records the answer and serves the next request. So each reader holds
exactly one thread per device, whatever happens, and a round of reads never waits for one
hung device longer than the caller's wait, however many devices hang. (A single worker for all
the devices made the devices after a hung one wait the whole deadline, long enough for their
readings to go stale, and a ``read_once`` over several hung GPUs wait one deadline each.)

``DeviceReader`` is the fast tick's reader (the tick group of ``catalog.py``): a device that is
not responding is served as ``state="not_responding"``, readings ``None``, and ``stale_s``:
seconds since its last answer (or since it was first asked, if it never answered).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from jupyter_gpu.readings.records import DeviceInfo, GroupReading

T = TypeVar("T")

READ_DEADLINE_S = 2.0
"""The default deadline of one NVML read (the server's ``read_deadline_s``, ``read_once``'s)."""

NOT_RESPONDING_MESSAGE = (
    "NVML has not answered for {stale:.0f} s (a call on this GPU is hung: the driver or the GPU "
    "stopped responding); readings resume by themselves when it answers again"
)


READ_NOTHING = GroupReading(state="error", error="reading failed: the backend read nothing")
"""The tick group's reading of a backend that gave none: a bug, said so on the GPU's card."""


@dataclass(frozen=True, slots=True)
class Timed(Generic[T]):
    """A device's answer and when it came (monotonic seconds)."""

    value: T
    at: float


class _Worker:
    """One device's thread: runs that device's reads one at a time, when the reader asks."""

    def __init__(self, reader: DeadlineReader[Any], index: int, name: str) -> None:
        self.reader = reader
        self.index = index
        self.asked = False
        self.since: float | None = None  # monotonic start of the call in flight
        self.wake = threading.Event()  # its own: asking one worker wakes no other thread
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    @property
    def free(self) -> bool:
        """Neither asked nor in a call (under the reader's lock)."""
        return not self.asked and self.since is None

    def _run(self) -> None:
        reader = self.reader
        cond = reader.cond
        while True:
            self.wake.wait()
            with cond:
                self.wake.clear()
                if reader.closed:
                    return
                if not self.asked:
                    continue
                self.asked = False
                self.since = time.monotonic()
            value = reader.call(self.index)
            with cond:
                reader.record(self.index, value)
                self.since = None
                reader.waiting.discard(self.index)
                if not reader.waiting:  # the last answer the caller waits for: wake it once
                    cond.notify_all()


class DeadlineReader(Generic[T]):
    """Reads devices through ``read_one``, one worker thread per device, with a deadline per call.

    Args:
        name: the workers' thread name prefix (``<name>-<index>``).
        indices: the devices' indices.
        read_one: reads one device. ``None`` means "nothing to record this time" (a GPM window
            that only began): the device's earlier answer stays, with its own age.
        deadline_s: a call out for this long makes its device not responding (``hung``).
        log: where a device that stops or starts answering is reported (once per change).
        what: what the reads are, for the log ("an NVML call", "an NVML GPM call", ...).
    """

    def __init__(
        self,
        name: str,
        indices: Sequence[int],
        read_one: Callable[[int], T | None],
        deadline_s: float,
        log: logging.Logger,
        *,
        what: str = "an NVML call",
    ) -> None:
        self.deadline_s = deadline_s
        self.cond = threading.Condition()
        self.closed = False
        self._read_one = read_one
        self._log = log
        self._what = what
        self._answers: dict[int, Timed[T]] = {}
        self._reported: set[int] = set()
        self.waiting: set[int] = set()
        """The devices whose answer the caller of ``read`` waits for (under ``cond``)."""
        self._workers = {i: _Worker(self, i, f"{name}-{i}") for i in indices}

    # -- the workers' side

    def call(self, index: int) -> T | None:
        try:
            return self._read_one(index)
        except Exception:  # noqa: BLE001 (a backend bug must not end the worker: logged)
            self._log.exception("jupyter_gpu: GPU %d: %s failed", index, self._what)
            return None

    def record(self, index: int, value: T | None) -> None:
        """Keep a device's answer (under ``cond``)."""
        if value is not None:
            self._answers[index] = Timed(value, time.monotonic())

    # -- the caller's side

    def read(self, wait_s: float) -> None:
        """Ask every free device for a new reading and wait up to ``wait_s`` for those answers.

        A device still in an earlier call (hung, or only slow) is not asked again and not
        waited for. Returns early once every device asked has answered, or the reader closes.
        """
        end = time.monotonic() + wait_s
        with self.cond:
            if self.closed:
                return
            asked = [w for w in self._workers.values() if w.free]
            self.waiting = {w.index for w in asked}
            for w in asked:
                w.asked = True
                w.wake.set()
            while not self.closed and self.waiting:
                left = end - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(left)
            self.waiting = set()
        self._report_changes()

    def answers(self) -> dict[int, Timed[T]]:
        """Each device's latest answer and when it came (devices that never answered: absent)."""
        with self.cond:
            return dict(self._answers)

    def hung(self) -> dict[int, float]:
        """Devices whose call has been out for ``deadline_s`` or more -> when it began."""
        now = time.monotonic()
        with self.cond:
            return {
                i: w.since
                for i, w in self._workers.items()
                if w.since is not None and now - w.since >= self.deadline_s
            }

    def in_call(self) -> set[int]:
        """Devices whose worker is in a call now (hung or not)."""
        with self.cond:
            return {i for i, w in self._workers.items() if w.since is not None}

    def _report_changes(self) -> None:
        hung = self.hung()
        for index in sorted(set(hung) - self._reported):
            self._reported.add(index)
            self._log.warning(
                "jupyter_gpu: GPU %d: %s has not returned after %.1f s; the GPU is shown as not "
                "responding until it does",
                index,
                self._what,
                time.monotonic() - hung[index],
            )
        for index in sorted(self._reported - set(hung)):
            self._reported.discard(index)
            self._log.warning("jupyter_gpu: GPU %d answers again (%s returned)", index, self._what)

    def thread_names(self) -> list[str]:
        """The workers that are alive (after ``close``: those still in a call)."""
        return [w.thread.name for w in self._workers.values() if w.thread.is_alive()]

    def close(self) -> None:
        """Stop the workers: free ones end now, one in a call when it returns. Never waits."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()
            workers = list(self._workers.values())
        for w in workers:
            w.wake.set()

    def join(self, until: float, grace_s: float = 0.2) -> None:
        """Wait for the workers to end, until monotonic time ``until``.

        A worker in a call gets ``grace_s`` at most (a call that ends as the backend closes
        returns by then; a hung one would only use up the caller's timeout).
        """
        with self.cond:
            idle = [w for w in self._workers.values() if w.since is None]
            busy = [w for w in self._workers.values() if w.since is not None]
        for w in idle:
            w.thread.join(max(0.0, until - time.monotonic()))
        grace_until = min(until, time.monotonic() + grace_s)
        for w in busy:
            w.thread.join(max(0.0, grace_until - time.monotonic()))


def not_responding(info: DeviceInfo, stale_s: float, message: str) -> GroupReading:
    """The fast reading of a device whose NVML call has not returned (no readings).

    Its memory total is the one it had when the backend opened (the card keeps its scale).
    """
    return GroupReading(
        values={"mem_total_bytes": info.mem_total_bytes},
        state="not_responding",
        error=message,
        stale_s=round(max(0.0, stale_s), 3),
    )


FastReading = tuple[GroupReading, float | None]
"""A device's fast reading and when it was taken (monotonic; ``None``: never)."""


class DeviceReader:
    """The fast tick's reads: every device's sample, its last one, or not responding.

    Args:
        devices: the devices (their identity fills the not-responding records).
        read_one: reads one device's fast group by index (a backend's ``read_group``; ``None``
            is taken for an error). A backend that knows
            a device is not responding (its open, or an earlier read by another reader of this
            process, has not returned) answers ``not_responding`` itself: that is not an
            answer, and the device's earlier readings keep their age.
        deadline_s: a read that has not returned after this long makes its device not
            responding.
        log: where a device that stops or starts answering is reported (once per change).
    """

    def __init__(
        self,
        devices: Sequence[DeviceInfo],
        read_one: Callable[[int], GroupReading | None],
        deadline_s: float,
        log: logging.Logger,
    ) -> None:
        self.devices = tuple(devices)
        self._by_index = {d.index: d for d in self.devices}
        self._read_one = read_one
        self._told: dict[int, GroupReading] = {}  # the backend's own "not responding" readings
        self._first_asked: float | None = None
        self._reader: DeadlineReader[GroupReading] = DeadlineReader(
            "jupyter-gpu-read", list(self._by_index), self._read, deadline_s, log
        )

    def _read(self, index: int) -> GroupReading | None:
        try:
            sample = self._read_one(index)
        except Exception as err:  # noqa: BLE001 (a backend bug is an error state, not a dead worker)
            return GroupReading(state="error", error=f"reading failed: {err}")
        if sample is None:  # a backend with devices reads the tick group
            return READ_NOTHING
        if sample.state == "not_responding":
            self._told[index] = sample
            return None
        self._told.pop(index, None)
        return sample

    def read(self, wait_s: float) -> tuple[FastReading, ...]:
        """Every device: its fresh reading, its last one, or not responding; with its time.

        Asks every device that is not in a call for a new reading and waits up to ``wait_s``.
        """
        now = time.monotonic()
        if self._first_asked is None:
            self._first_asked = now
        self._reader.read(wait_s)
        answers = self._reader.answers()
        hung = self._reader.hung()
        now = time.monotonic()
        out: list[FastReading] = []
        for info in self.devices:
            answer = answers.get(info.index)
            at = answer.at if answer is not None else None
            told = self._told.get(info.index)
            if info.index in hung or (answer is None and told is None):
                since = at if at is not None else hung.get(info.index, self._first_asked)
                stale = now - since
                message = NOT_RESPONDING_MESSAGE.format(stale=stale)
                out.append((not_responding(info, stale, message), at))
            elif told is not None:
                out.append((told, at))
            else:
                assert answer is not None
                out.append((answer.value, at))
        return tuple(out)

    def last_answer_age_s(self) -> dict[int, float | None]:
        """Seconds since each device last answered (``None``: never), by index."""
        now = time.monotonic()
        answers = self._reader.answers()
        return {
            d.index: (now - a.at) if (a := answers.get(d.index)) else None for d in self.devices
        }

    @property
    def any_hung(self) -> bool:
        """Whether some device's call has been out past the deadline."""
        return bool(self._reader.hung())

    def thread_names(self) -> list[str]:
        """The reader's threads that are alive."""
        return self._reader.thread_names()

    def close(self) -> None:
        """Stop the workers (one in a call ends when it returns). Never waits."""
        self._reader.close()

    def join(self, until: float) -> None:
        """Wait, until monotonic ``until``, for the workers that are not in a call."""
        self._reader.join(until)
