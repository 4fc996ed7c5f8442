"""Starting NVML behind a deadline: ``nvmlInit`` and counting the GPUs may never return.

A driver that stops answering blocks ``nvmlInit`` or ``nvmlDeviceGetCount`` as it blocks any
other NVML call, for seconds or until the GPU is reset. So NVML is started in a thread of its
own (``Background``), and the caller waits only as long as it chooses:

- the server's sampler waits a second, then serves the host's readings and the caches with the
  reason ``not_answered_reason`` gives ("NVML has not answered for 12 s: ..."), and takes the
  GPUs in at the first tick after NVML answers (``sampling/sampler.py``);
- a kernel's one-shot reads (``%gpu``, ``%gpu --topology``, ``%%torchrun``'s GPU count) go
  through ``call_within``: an answer within the deadline, else ``NotAnswered``. The thread left
  in the call cleans up after itself when it returns (``dispose``), and a later call of the same
  kind waits for that one's answer instead of starting a second thread into a hung driver.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

NVML_START = "nvml-start"
"""The kind of call that starts NVML (``nvmlInit``, counting the GPUs) for ``call_within``."""

NOT_ANSWERED_REASON = (
    "NVML has not answered for {waited:.0f} s: nvmlInit or counting the GPUs has not returned "
    "(the driver is slow to start, or hung). The host's readings go on; the GPUs appear when "
    "NVML answers, without a restart"
)
SIMULATED_NOT_ANSWERED_PREFIX = "Simulated fault (hang:init, JupyterGpu.simulated_faults): "

_log = logging.getLogger("jupyter_gpu")


def not_answered_reason(waited_s: float, *, simulated: bool = False) -> str:
    """The server's reason while NVML has not answered for ``waited_s`` seconds."""
    text = NOT_ANSWERED_REASON.format(waited=waited_s)
    return SIMULATED_NOT_ANSWERED_PREFIX + text if simulated else text


class Background(Generic[T]):
    """``fn()`` in a daemon thread of its own, started at once: a call that may never return.

    Args:
        name: the thread's name.
        fn: the call; what it returns (or raises) is kept for ``result``.
    """

    def __init__(self, name: str, fn: Callable[[], T]) -> None:
        self.since = time.monotonic()
        """When the call began (monotonic seconds)."""
        self.answered_at: float | None = None
        """When it returned or raised (monotonic seconds); ``None`` while it is out."""
        self._fn = fn
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._value: T | None = None
        self._error: BaseException | None = None
        self._dispose: Callable[[T], object] | None = None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        value: T | None = None
        error: BaseException | None = None
        try:
            value = self._fn()
        except BaseException as err:  # noqa: BLE001 (kept, and raised by ``result``)
            error = err
        with self._lock:
            self._value, self._error = value, error
            self.answered_at = time.monotonic()
            self._done.set()
            dispose = self._dispose
        if dispose is not None and error is None:
            self._run_dispose(dispose, value)

    @property
    def done(self) -> bool:
        """Whether the call has returned (or raised)."""
        return self._done.is_set()

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds for the call; whether it has returned."""
        return self._done.wait(max(0.0, timeout_s))

    def waited_s(self) -> float:
        """Seconds since the call began."""
        return time.monotonic() - self.since

    def result(self) -> T:
        """What the call returned.

        Raises:
            RuntimeError: it has not returned yet.
            BaseException: what the call raised.
        """
        if not self._done.is_set():
            raise RuntimeError("the call has not returned yet")
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set with _done when no error

    def abandon(self, dispose: Callable[[T], object]) -> None:
        """Nobody wants the answer: ``dispose`` it when it comes (now, if it has come)."""
        with self._lock:
            if not self._done.is_set():
                self._dispose = dispose
                return
        if self._error is None:
            self._run_dispose(dispose, self._value)

    @staticmethod
    def _run_dispose(dispose: Callable[[T], object], value: Any) -> None:
        try:
            dispose(value)
        except Exception:  # noqa: BLE001 (closing what nobody uses is best effort: logged)
            _log.debug("jupyter_gpu: disposing of a late answer failed", exc_info=True)


@dataclass(frozen=True, slots=True)
class NotAnswered:
    """A call that did not return within its deadline.

    Attributes:
        since: when the call still out began (monotonic seconds): this caller's, or an earlier
            caller's that this one waited for.
        deadline_s: how long this caller waited.
    """

    since: float
    deadline_s: float

    @property
    def waited_s(self) -> float:
        """Seconds since the call still out began."""
        return time.monotonic() - self.since


_OUT: dict[str, Background[Any]] = {}
"""Per kind: a call that a caller gave up on and that has not returned yet (process-wide)."""
_OUT_LOCK = threading.Lock()


def call_within(
    kind: str,
    name: str,
    fn: Callable[[], T],
    deadline_s: float,
    dispose: Callable[[T], object] = lambda _value: None,
) -> T | NotAnswered:
    """``fn()`` in a thread of its own: its answer within ``deadline_s``, else ``NotAnswered``.

    A call that was given up on stays in its thread and ``dispose`` gets its answer when it
    comes (an NVML session to close). While a call of the same ``kind`` that an earlier caller
    gave up on is still out, this caller waits for that one (up to its own deadline) instead of
    starting another: a hung driver holds one thread per kind of call in the whole process.

    Raises:
        BaseException: what ``fn`` raised, when it answered in time.
    """
    until = time.monotonic() + deadline_s
    with _OUT_LOCK:
        earlier = _OUT.get(kind)
    if earlier is not None:
        if not earlier.wait(until - time.monotonic()):
            return NotAnswered(earlier.since, deadline_s)
        with _OUT_LOCK:
            if _OUT.get(kind) is earlier:
                del _OUT[kind]
    call = Background(name, fn)
    if call.wait(until - time.monotonic()):
        return call.result()
    call.abandon(dispose)
    with _OUT_LOCK:
        _OUT[kind] = call
    return NotAnswered(call.since, deadline_s)
