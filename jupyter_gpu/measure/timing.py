"""One ``Timing``, one ``synchronize``, one duration format, timers of a single step, busy time.

A comparison of two ways to run a step never uses two of these timers one after the other: it
goes through :func:`jupyter_gpu.measure.compare` (interleaved rounds, an interval). These time
one thing: a first call (compile included), or a step's steady time for a throughput figure.
Each holds ``quiet.timing_in_progress`` while it times, as ``compare()`` does: our own background
work waits meanwhile.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .digits import three_digits
from .quiet import timing_in_progress


def fmt_seconds(s: float | None) -> str:
    """A duration with the unit that reads best and three significant digits, zeros kept.

    ``2e-5`` reads ``20.0 µs``, ``0.0123`` ``12.3 ms``, ``0.0012`` ``1.20 ms``, ``2.0``
    ``2.00 s``; ``None`` or NaN reads ``n/a``. The zeros are kept so that an interval's ends
    read alike (``1.15 ms-1.20 ms``, not ``1.15 ms-1.2 ms``).
    """
    if s is None or math.isnan(s):
        return "n/a"
    if s >= 99.95:
        return f"{s:.0f} s"
    if s >= 0.9995:  # what rounds to 1.00 s reads so, not 1000 ms
        return f"{s:.2f} s"
    if s >= 0.9995e-3:
        return f"{three_digits(s * 1e3)} ms"
    return f"{three_digits(s * 1e6)} µs"


def union_length(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by possibly overlapping ``(start, end)`` intervals, in their unit.

    A GPU's busy time is the union of its kernels' intervals: overlapping kernels count once.
    """
    total, current_start, current_end = 0.0, None, None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None and current_start is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None and current_start is not None:
        total += current_end - current_start
    return total


def _cuda_in_use() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized())


def synchronize(device: Any = None) -> None:
    """Wait for the GPU work queued so far, so that a time covers it, not just its launch.

    Args:
        device: a device (``"cuda:1"``, a ``torch.device``): wait for it if it is a CUDA
            device, nothing to wait for otherwise (CPU). ``None``: the current CUDA device if
            this process already uses CUDA; never initialises CUDA.
    """
    if device is None:
        if _cuda_in_use():
            sys.modules["torch"].cuda.synchronize()
        return
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class Timing:
    """Wall-clock times of ``runs`` calls made after ``warmup`` untimed ones, in seconds."""

    times_s: tuple[float, ...]
    warmup: int
    #: Calls queued back to back in each timed run (``times_s`` is per call): see
    #: :func:`time_back_to_back`.
    calls_per_run: int = 1

    def __repr__(self) -> str:
        return f"Timing(median_s={self.median_s:.6g}, runs={self.runs}, warmup={self.warmup})"

    @property
    def runs(self) -> int:
        """How many timed calls."""
        return len(self.times_s)

    @property
    def median_s(self) -> float:
        """Median time of one call, in seconds."""
        return statistics.median(self.times_s)

    @property
    def min_s(self) -> float:
        """Fastest call, in seconds."""
        return min(self.times_s)

    @property
    def spread(self) -> float:
        """(slowest - fastest) / median: how steady the runs were."""
        return (max(self.times_s) - min(self.times_s)) / self.median_s

    @property
    def spread_s(self) -> float:
        """Inter-quartile range of the runs (seconds); the full range below 4 runs."""
        if len(self.times_s) < 4:
            return max(self.times_s) - min(self.times_s)
        q = statistics.quantiles(self.times_s, n=4)
        return q[2] - q[0]

    def rate(self, items_per_call: float) -> float:
        """Items per second at the median time (tokens/s, images/s...)."""
        return items_per_call / self.median_s

    def describe(self) -> str:
        """E.g. ``12.3 ms (median of 10 runs after 3 warm-up)``."""
        median = fmt_seconds(self.median_s)
        if self.calls_per_run > 1:
            return (
                f"{median} a call (median of {self.runs} runs of {self.calls_per_run} calls "
                f"back to back, after {self.warmup} warm-up)"
            )
        return f"{median} (median of {self.runs} runs after {self.warmup} warm-up)"


def _timed(fn: Callable[[], object], device: Any) -> float:
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


@timing_in_progress()
def time_steady(
    fn: Callable[[], object],
    *,
    warmup: int = 3,
    runs: int | None = None,
    target_s: float = 1.0,
    min_runs: int = 5,
    max_runs: int = 500,
    device: Any = None,
) -> Timing:
    """Time ``fn`` in steady state: ``warmup`` calls, then runs timed one by one.

    Every call is bracketed by :func:`synchronize` on ``device``, so the GPU work it queued is
    counted. Without ``runs``, as many runs as fit in about ``target_s`` seconds (estimated from
    the last warm-up call), between ``min_runs`` and ``max_runs``.

    Raises:
        ValueError: ``runs`` < 1 or ``warmup`` < 0.
    """
    if (runs is not None and runs < 1) or warmup < 0:
        raise ValueError(f"need runs >= 1 and warmup >= 0, got {runs=}, {warmup=}")
    last = 0.0
    for _ in range(warmup):
        last = _timed(fn, device)
    if runs is None:
        runs = int(min(max(target_s / max(last, 1e-6), min_runs), max_runs))
    return Timing(tuple(_timed(fn, device) for _ in range(runs)), warmup)


@timing_in_progress()
def time_back_to_back(
    fn: Callable[[], object],
    *,
    calls: int,
    runs: int,
    warmup: int = 1,
    device: Any = None,
) -> Timing:
    """Time ``fn`` as a training loop runs it: ``calls`` calls queued between two synchronisations.

    :func:`time_steady` synchronises around every call, so each call also waits for the host's
    work before its first kernel reaches the GPU. In a loop the CPU prepares the next call while
    the GPU still runs this one, and that wait is hidden. Each of the ``runs`` times is the
    run's time divided by ``calls``.

    Raises:
        ValueError: ``calls`` or ``runs`` < 1, or ``warmup`` < 0.
    """
    if calls < 1 or runs < 1 or warmup < 0:
        raise ValueError(f"need calls, runs >= 1 and warmup >= 0, got {calls=}, {runs=}, {warmup=}")
    for _ in range(warmup):
        _timed(fn, device)
    times = []
    for _ in range(runs):
        synchronize(device)
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        synchronize(device)
        times.append((time.perf_counter() - start) / calls)
    return Timing(tuple(times), warmup, calls)


@timing_in_progress()
def time_first_call(fn: Callable[[], object], *, device: Any = None) -> float:
    """Seconds for one call, synchronised (e.g. a compiled model's first step, compile included)."""
    return _timed(fn, device)
