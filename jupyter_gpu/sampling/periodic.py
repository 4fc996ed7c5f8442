"""A background thread that calls one function on a fixed cadence and keeps its latest result."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Periodic(Generic[T]):
    """Runs ``fn(stop)`` every ``interval_s`` seconds in a daemon thread; ``latest`` is its result.

    Used for the work that must never delay the sampler's tick: the compile-cache scan, and the
    rounds of GPM and PCIe reads (each device read in its own worker, ``deadline.py``). ``fn``
    gets the stop event so that a long run can end early. An exception in ``fn`` is logged once
    (with its traceback) and the thread carries on.
    """

    def __init__(
        self,
        name: str,
        interval_s: float,
        fn: Callable[[threading.Event], T],
        initial: T,
        log: logging.Logger,
    ) -> None:
        self.latest: T = initial
        self.runs = 0
        self.last_duration_s: float | None = None
        self._interval_s = interval_s
        self._fn = fn
        self._log = log
        self._stop = threading.Event()
        self._failed_before = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the thread to end and wait for it (up to ``timeout`` seconds; 0: do not wait)."""
        self._stop.set()
        self.join(time.monotonic() + timeout)

    def join(self, until: float) -> None:
        """Wait for the thread to end, until monotonic time ``until``."""
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(max(0.0, until - time.monotonic()))

    @property
    def name(self) -> str:
        """The thread's name."""
        return self._thread.name

    @property
    def alive(self) -> bool:
        """Whether the thread is running."""
        return self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.is_set():
            start = time.perf_counter()
            try:
                self.latest = self._fn(self._stop)
                self.runs += 1
                self._failed_before = False
            except Exception:  # noqa: BLE001 (keep the thread alive: the next run may work)
                if not self._failed_before:
                    self._log.exception("jupyter_gpu: %s failed", self._thread.name)
                self._failed_before = True
            self.last_duration_s = time.perf_counter() - start
            # The next run starts interval_s after this one started, or, when this one
            # outlasted the interval (a huge cache on a slow disk), a whole interval after it
            # ended: never back to back, so a slow scan cannot keep a core busy for good.
            left = self._interval_s - self.last_duration_s
            self._stop.wait(left if left > 0 else self._interval_s)
