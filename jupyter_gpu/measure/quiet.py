"""Our own background work waits while a figure is timed.

A thread this package starts in the notebook's process runs beside the user's code: ``%compile``
walks the on-disk compile caches in one (``magics/compile/cache_walk.py``), right before
``--bench`` times, and again after every cell that compiled, when the next cell may be the one
that times. Such a thread competes with the timed calls for the GIL and the CPU: on the 2-core
development VM, a walk of a 100,000-file cache beside :func:`~jupyter_gpu.measure.compare` made
a small GPT forward's calls 2.1-2.5x as long, and moved its compiled-over-eager ratio from 1.35x
(1.35-1.37x) to 1.55x (1.36-1.78x) (``benchmarks/background_walk.py``, 2026-12-08;
``benchmarks/RESULTS.md``). A figure must not carry the cost of the tool that measures it.

So every timed stretch of ours holds :func:`timing_in_progress` (``compare()``, the steady and
back-to-back timers, the profiler's calls behind a "Why", ``%%profile``'s steps), and our
background work calls :func:`pause_while_timing` between small pieces of itself: it stops within
one piece and goes on when the last timed stretch ends. Only our own threads wait here; the
user's threads, torch's compile workers and other processes are the machine's, and
``machine.py`` notes the CPU load they make.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator


class _TimedStretches:
    """The timed stretches in progress, per thread (they nest: compare() times a first call too)."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.count = 0
        self.by_thread: dict[int, int] = {}

    def others(self) -> bool:
        """Whether a thread other than this one is timing (call with ``changed`` held)."""
        return self.count > self.by_thread.get(threading.get_ident(), 0)


_STRETCHES = _TimedStretches()


@contextlib.contextmanager
def timing_in_progress() -> Iterator[None]:
    """Hold while figures are being timed: our background work waits until it ends.

    Also a decorator (``@timing_in_progress()``), for a function that times.
    """
    me = threading.get_ident()
    with _STRETCHES.changed:
        _STRETCHES.count += 1
        _STRETCHES.by_thread[me] = _STRETCHES.by_thread.get(me, 0) + 1
    try:
        yield
    finally:
        with _STRETCHES.changed:
            _STRETCHES.count -= 1
            _STRETCHES.by_thread[me] -= 1
            if not _STRETCHES.by_thread[me]:
                del _STRETCHES.by_thread[me]
            _STRETCHES.changed.notify_all()


def timing_now() -> bool:
    """Whether a timed stretch is in progress."""
    return _STRETCHES.count > 0


def pause_while_timing() -> float:
    """Wait while another thread times; the seconds waited (0 at once when none does).

    For work between small pieces of itself. The thread that times never waits for itself: work
    it runs inside its own timed stretch goes on (that work is then part of the figure).
    """
    if not _STRETCHES.count:  # the common case: one read, no lock
        return 0.0
    with _STRETCHES.changed:
        if not _STRETCHES.others():
            return 0.0
        start = time.monotonic()
        while _STRETCHES.others():
            _STRETCHES.changed.wait()
    return time.monotonic() - start
