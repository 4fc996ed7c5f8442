"""The torch.compile caches' size on disk, walked in a background thread for ``%compile``.

``%compile``'s reports say how many bytes a compile added to the on-disk caches. Walking the
caches takes about a second for 100,000 files (benchmarks/compile_cache_walk.py), far too long
for the end of every compiling cell, which used to walk them in full. Here one daemon thread
walks them (``jupyter_gpu.compile_cache.scan_caches``, which never follows symlinks); the cell
waits for it only a few milliseconds (``WAIT_S``). A small cache is measured within that and
the report shows the figure at once; a large one is measured after the cell, and the figure
lands in the report object (``CompileReport.cache_bytes_added``) when the walk ends. The walk
stops, between two directories, while a figure is timed (``jupyter_gpu/measure/quiet.py``):
beside ``--bench``'s rounds or a timing cell it would slow the calls it times.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

#: How long the end of a compiling cell waits for the walk before leaving it to the thread.
WAIT_S = 0.02


def _scan() -> int | None:
    try:
        from jupyter_gpu.compile_cache import scan_caches
        from jupyter_gpu.measure.quiet import pause_while_timing

        # The walk waits while a figure is timed (--bench starts it just before its rounds).
        return int(scan_caches(pause=pause_while_timing).size_bytes)
    except OSError:
        return None


class Walk:
    """One requested walk: its result (bytes, or ``None`` if unreadable) once it is done."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._value: int | None = None
        self._callbacks: list[Callable[[int | None], None]] = []
        self._lock = threading.Lock()

    def wait(self, timeout: float | None) -> tuple[bool, int | None]:
        """(finished, bytes): waits at most ``timeout`` seconds."""
        done = self._done.wait(timeout)
        return done, self._value if done else None

    def then(self, callback: Callable[[int | None], None]) -> None:
        """Call ``callback(bytes)`` when the walk ends (at once if it has)."""
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(callback)
                return
        callback(self._value)

    def finish(self, value: int | None) -> None:
        with self._lock:
            self._value = value
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(value)


class CacheSizer:
    """Walks the caches in a daemon thread; ``latest`` is the last finished walk's size."""

    def __init__(self, scan: Callable[[], int | None] = _scan) -> None:
        self._scan = scan
        self._lock = threading.Lock()
        self._running: Walk | None = None
        self._next: Walk | None = None
        self.latest: int | None = None

    def refresh(self) -> Walk:
        """A walk that starts now or, if one is running, right after it (files may have come)."""
        with self._lock:
            if self._running is None:
                walk = self._running = Walk()
                threading.Thread(
                    target=self._loop, name="jupyter-gpu-cache-walk", daemon=True
                ).start()
                return walk
            if self._next is None:
                self._next = Walk()
            return self._next

    def _loop(self) -> None:
        while True:
            with self._lock:
                walk = self._running
            if walk is None:
                return
            value = self._scan()
            if value is not None:
                self.latest = value
            walk.finish(value)
            with self._lock:
                self._running, self._next = self._next, None
                if self._running is None:
                    return


#: One per kernel: every %compile of the notebook shares it.
SIZER = CacheSizer()
