"""Steady-state step times: warm up first, synchronise the GPU around each run, take medians."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Timing:
    """Wall-clock times of ``runs`` calls made after ``warmup`` untimed ones, in seconds."""

    times_s: tuple[float, ...]
    warmup: int

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

    def rate(self, items_per_call: float) -> float:
        """Items per second at the median time (tokens/s, images/s...)."""
        return items_per_call / self.median_s

    def describe(self) -> str:
        """E.g. ``12.3 ms (median of 10 runs after 3 warm-up)``."""
        median = format_seconds(self.median_s)
        return f"{median} (median of {self.runs} runs after {self.warmup} warm-up)"


def format_seconds(seconds: float) -> str:
    """A duration in the unit that reads best: µs, ms or s."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def synchronize(device: str | torch.device) -> None:
    """Wait for queued GPU work on ``device`` (nothing to wait for on the CPU)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def time_calls(
    fn: Callable[[], object], *, runs: int, warmup: int, device: str | torch.device
) -> Timing:
    """Call ``fn`` ``warmup`` times untimed, then ``runs`` times, each timed on its own.

    The GPU is synchronised before and after each timed call, so a time covers the work the
    call queued, not just its launch.

    Raises:
        ValueError: ``runs`` < 1 or ``warmup`` < 0.
    """
    if runs < 1 or warmup < 0:
        raise ValueError(f"need runs >= 1 and warmup >= 0, got {runs=}, {warmup=}")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return Timing(tuple(times), warmup)


def time_first_call(fn: Callable[[], object], *, device: str | torch.device) -> float:
    """Seconds for one call, synchronised (e.g. a compiled model's first step, compile included)."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start
