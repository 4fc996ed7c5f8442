"""One NVML session, ``nvmlInit`` to ``nvmlShutdown``, with every call on a GPU counted.

NVML has one ``nvmlShutdown`` for every GPU, and calling it while a call is out on a hung GPU
could wait on that call or pull the library from under it. So a session counts the calls out
on each GPU: ``close`` never waits, and shuts NVML down at once when no call is out, or else
when the last call out returns (a call that never returns leaves NVML to the process's exit).
A GPU with a call of one kind (its fast reads, GPM, PCIe, opening it, its topology) out past
the deadline, in any session of this process (the server's sampler, ``%gpu --watch``'s,
``read_once``), is not asked for that kind again until the call returns: a hung GPU holds at
most one stuck thread per kind of read in the whole process, never one more per ``%gpu``, and
a GPU whose GPM calls hang still gives its fast readings.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Stuck(Exception):
    """A call on this GPU has been out past the deadline: another would only hang as well."""

    def __init__(self, since: float) -> None:
        super().__init__(since)
        self.since = since
        """When the oldest call out began (monotonic seconds)."""


class Closed(Exception):
    """The session is closed: no new NVML call."""


class _CallsOut:
    """The NVML calls in flight in this process, by physical GPU and kind (every session's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0
        # token -> (physical GPU, kind, monotonic start)
        self._out: dict[int, tuple[int, str, float]] = {}

    def stuck_since(self, gpu: int, kind: str, deadline_s: float) -> float | None:
        """When the oldest call of ``kind`` on ``gpu`` out past ``deadline_s`` began."""
        now = time.monotonic()
        with self._lock:
            out = [t for g, k, t in self._out.values() if (g, k) == (gpu, kind)]
        stuck = [t for t in out if now - t >= deadline_s]
        return min(stuck) if stuck else None

    def begin(self, gpu: int, kind: str, deadline_s: float) -> int:
        """Register a call; raises ``Stuck`` if one of its kind is out past ``deadline_s``."""
        since = self.stuck_since(gpu, kind, deadline_s)
        if since is not None:
            raise Stuck(since)
        with self._lock:
            self._next += 1
            self._out[self._next] = (gpu, kind, time.monotonic())
            return self._next

    def end(self, token: int) -> None:
        with self._lock:
            self._out.pop(token, None)


CALLS_OUT = _CallsOut()


class NvmlSession:
    """``nvmlInit`` now, ``nvmlShutdown`` once no call is out after ``close``.

    Args:
        nvml: pynvml (or a fake with its interface).
        deadline_s: a GPU with a call out this long is not asked for that kind again until
            it returns.
        log: where a shutdown left for a hung call is reported.
        release: runs just before ``nvmlShutdown`` (frees what the session's GPUs hold).

    Raises:
        NVMLError: ``nvmlInit`` failed.
    """

    def __init__(
        self,
        nvml: Any,
        deadline_s: float,
        log: logging.Logger,
        release: Callable[[], object] = lambda: None,
    ) -> None:
        self._nvml = nvml
        self.deadline_s = deadline_s
        self._log = log
        self._release = release
        self._lock = threading.Lock()
        self._in_flight: dict[int, int] = {}  # physical GPU -> this session's calls out on it
        self._closing = False
        self._shut = False
        nvml.nvmlInit()

    def call(self, gpu: int, kind: str, fn: Callable[[], T]) -> T:
        """``fn()``, counted as a call of ``kind`` (``"fast"``, ``"gpm"``...) on GPU ``gpu``.

        Raises:
            Stuck: a call of this kind on ``gpu`` is out past the deadline (not asked again).
            Closed: the session is closed.
        """
        self._count_in(gpu)
        try:
            token = CALLS_OUT.begin(gpu, kind, self.deadline_s)
            try:
                return fn()
            finally:
                CALLS_OUT.end(token)
        finally:
            if self._count_out(gpu):  # the last call out of a closed session
                self._shutdown()

    def _count_in(self, gpu: int) -> None:
        with self._lock:
            if self._closing:
                raise Closed
            self._in_flight[gpu] = self._in_flight.get(gpu, 0) + 1

    def _count_out(self, gpu: int) -> bool:
        """Count a call back in; whether NVML is to be shut down now."""
        with self._lock:
            self._in_flight[gpu] -= 1
            if not self._in_flight[gpu]:
                del self._in_flight[gpu]
            return self._closing and not self._in_flight

    def close(self) -> list[int]:
        """No new call; ``nvmlShutdown`` now, or when the last call out returns. Never waits.

        Returns the GPUs with a call still out (empty when NVML was shut down now). Safe to
        call twice.
        """
        with self._lock:
            if self._closing:
                return sorted(self._in_flight)
            self._closing = True
            out = sorted(self._in_flight)
        if out:
            self._log.warning(
                "jupyter_gpu: NVML left open until the call out on GPU %s returns (nvmlShutdown "
                "could wait on it)",
                ", ".join(str(g) for g in out),
            )
            return out
        self._shutdown()
        return []

    def _shutdown(self) -> None:
        with self._lock:
            if self._shut:
                return
            self._shut = True
        try:
            self._release()
        finally:
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()
