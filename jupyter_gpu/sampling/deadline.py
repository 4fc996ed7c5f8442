"""Device reads with a deadline: a hung NVML call never blocks the sampler's tick.

A driver can stop answering: an NVML call then blocks (for seconds, or until the GPU is reset).
The reads of every device therefore run in a worker thread, one device after another; the
sampler's tick waits for them only a short while (``wait_s``) and serves what it has. A device
whose read has not returned ``deadline_s`` after it began is "not responding": the worker stuck
in that call is abandoned (it is left to finish the call, then it records the answer and ends)
and a new worker reads the other devices. The hung device is not read again until its call
returns, so each device costs at most one abandoned thread, whatever happens: the threads are
one worker plus one per hung device. When the call returns, the device answers again on the
next tick, without a restart.

A device that is not responding is served as ``state="not_responding"``, readings ``None``, and
``stale_s``: seconds since its last answer (or since it was first asked, if it never answered).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jupyter_gpu.sampling.records import DeviceInfo, DeviceSample

NOT_RESPONDING_MESSAGE = (
    "NVML has not answered for {stale:.0f} s (a call on this GPU is hung: the driver or the GPU "
    "stopped responding); readings resume by themselves when it answers again"
)


@dataclass
class _Answer:
    sample: DeviceSample
    at: float  # monotonic seconds when the read returned


class _Worker:
    """One thread that reads the devices of a job, one after another."""

    def __init__(self, reader: DeviceReader, number: int) -> None:
        self.reader = reader
        self.jobs: list[list[int]] = []
        self.wake = threading.Event()
        self.idle = threading.Event()
        self.idle.set()
        self.current: int | None = None
        self.current_since = 0.0
        self.remaining: list[int] = []
        self.abandoned = False
        self.thread = threading.Thread(
            target=self._run, name=f"jupyter-gpu-read-{number}", daemon=True
        )
        self.thread.start()

    def given_up(self) -> bool:
        """Whether the reader abandoned this worker (set by the sampler's thread)."""
        return self.abandoned

    def submit(self, devices: list[int]) -> None:
        self.idle.clear()
        self.jobs.append(devices)
        self.wake.set()

    def _run(self) -> None:
        reader = self.reader
        while True:
            self.wake.wait()
            self.wake.clear()
            if reader.closed.is_set():
                return
            while self.jobs:
                job = self.jobs.pop(0)
                for k, index in enumerate(job):
                    with reader.lock:
                        if self.abandoned or reader.closed.is_set():
                            return
                        self.current, self.current_since = index, time.monotonic()
                        self.remaining = job[k + 1 :]
                    sample = reader.read_one(index)
                    with reader.lock:
                        reader.record(index, sample)
                        self.current = None
                        if self.given_up():  # answered at last: the device is free again
                            reader.hung.pop(index, None)
                            return
                with reader.lock:
                    self.remaining = []
            self.idle.set()


class DeviceReader:
    """Reads devices through ``read_one`` in worker threads, with a deadline per read.

    Args:
        devices: the devices (their identity fills the not-responding records).
        read_one: reads one device by index; never raises (a backend's ``read_device``).
        deadline_s: a read that has not returned after this long makes its device not
            responding.
        log: where a device that stops or starts answering is reported (once per change).
    """

    def __init__(
        self,
        devices: Sequence[DeviceInfo],
        read_one: Callable[[int], DeviceSample],
        deadline_s: float,
        log: logging.Logger,
    ) -> None:
        self.devices = tuple(devices)
        self.deadline_s = deadline_s
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self.hung: dict[int, float] = {}
        """Device index -> monotonic time its hung call began (its worker is abandoned)."""
        self.answers: dict[int, _Answer] = {}
        self.workers_started = 0
        self._read_one = read_one
        self._log = log
        self._first_asked: float | None = None
        self._reported_hung: set[int] = set()
        self._abandoned: list[_Worker] = []
        self._worker = self._new_worker()

    # -- used by the workers (under ``lock`` where it says so)

    def read_one(self, index: int) -> DeviceSample:
        try:
            return self._read_one(index)
        except Exception as err:  # noqa: BLE001 (a backend bug must not end the worker)
            info = self.devices[[d.index for d in self.devices].index(index)]
            return DeviceSample(
                index, info.uuid, info.name, state="error", error=f"reading failed: {err}"
            )

    def record(self, index: int, sample: DeviceSample) -> None:
        """Keep a device's answer (under ``lock``)."""
        self.answers[index] = _Answer(sample, time.monotonic())

    def _new_worker(self) -> _Worker:
        self.workers_started += 1
        return _Worker(self, self.workers_started)

    # -- the sampler's side

    def read(self, wait_s: float) -> tuple[DeviceSample, ...]:
        """Every device: its fresh reading, its last one, or not responding.

        Starts a read of every device that is not hung (unless the previous one is still
        going), waits up to ``wait_s`` for it, abandons a worker stuck past the deadline.
        """
        now = time.monotonic()
        if self._first_asked is None:
            self._first_asked = now
        worker = self._worker
        with self.lock:
            if worker.idle.is_set():
                worker.submit([d.index for d in self.devices if d.index not in self.hung])
        worker.idle.wait(wait_s)
        now = time.monotonic()
        with self.lock:
            if worker.current is not None and now - worker.current_since >= self.deadline_s:
                self.hung[worker.current] = worker.current_since
                worker.abandoned = True
                self._abandoned.append(worker)
                self._worker = self._new_worker()
                if worker.remaining:
                    self._worker.submit(list(worker.remaining))
            self._abandoned = [w for w in self._abandoned if w.thread.is_alive()]
            return tuple(self._device(info, now) for info in self.devices)

    def _device(self, info: DeviceInfo, now: float) -> DeviceSample:
        index = info.index
        answer = self.answers.get(index)
        hung_since = self.hung.get(index)
        if hung_since is None and answer is not None:
            if index in self._reported_hung:
                self._reported_hung.discard(index)
                self._log.warning("jupyter_gpu: GPU %d answers again", index)
            return answer.sample
        since = answer.at if answer is not None else (hung_since or self._first_asked or now)
        stale = max(0.0, now - since)
        if hung_since is not None and index not in self._reported_hung:
            self._reported_hung.add(index)
            self._log.warning(
                "jupyter_gpu: GPU %d: an NVML call has not returned after %.1f s; the GPU is "
                "shown as not responding until it does",
                index,
                now - hung_since,
            )
        return DeviceSample(
            index,
            info.uuid,
            info.name,
            state="not_responding",
            error=NOT_RESPONDING_MESSAGE.format(stale=stale),
            mem_total_bytes=info.mem_total_bytes,
            stale_s=round(stale, 3),
        )

    def last_answer_age_s(self) -> dict[int, float | None]:
        """Seconds since each device last answered (``None``: never), by index."""
        now = time.monotonic()
        with self.lock:
            return {
                d.index: (now - a.at) if (a := self.answers.get(d.index)) else None
                for d in self.devices
            }

    @property
    def any_hung(self) -> bool:
        """Whether some device's call has not returned (closing NVML could block on it)."""
        return bool(self.hung)

    def thread_names(self) -> list[str]:
        """The reader's threads that are alive (the worker and the abandoned ones)."""
        with self.lock:
            workers = [self._worker, *self._abandoned]
        return [w.thread.name for w in workers if w.thread.is_alive()]

    def close(self, timeout: float = 1.0) -> None:
        """Stop the workers; a worker stuck in a call is left to it (it is a daemon)."""
        self.closed.set()
        with self.lock:
            workers = [self._worker, *self._abandoned]
        for w in workers:
            w.wake.set()
        deadline = time.monotonic() + timeout
        for w in workers:
            w.thread.join(max(0.0, deadline - time.monotonic()))
