"""Steady-state step times for the notebooks: warm up, synchronise around each run, take medians.

The measuring is ``jupyter_gpu.measure``'s, the same as the magics'.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from jupyter_gpu.measure import (
    Timing,
    synchronize,
    time_back_to_back,
    time_first_call,
    time_steady,
)
from jupyter_gpu.measure import fmt_seconds as format_seconds

__all__ = [
    "Timing",
    "format_seconds",
    "synchronize",
    "time_back_to_back",
    "time_calls",
    "time_first_call",
]


def time_calls(
    fn: Callable[[], object], *, runs: int, warmup: int, device: str | torch.device
) -> Timing:
    """Call ``fn`` ``warmup`` times, then ``runs`` times, each timed on its own.

    The GPU is synchronised before and after each call, so a time covers the work the call
    queued, not just its launch.

    Raises:
        ValueError: ``runs`` < 1 or ``warmup`` < 0.
    """
    return time_steady(fn, runs=runs, warmup=warmup, device=device)
