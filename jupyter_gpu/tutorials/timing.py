"""Steady-state step times for the notebooks: warm up, synchronise around each run, take medians.

The measuring is ``jupyter_gpu.measure``'s, the same as the magics'. :func:`time_interleaved`
times several variants of a step in alternating rounds, so that they share one baseline (a GPU
that clocks down, or a neighbour's job, slows every variant alike), and gives each ratio with its
interval; :func:`gpu_busy_per_call`
says how much of a call the GPU spent running kernels, through :func:`profile_calls` (one
``torch.profiler`` run, without torch 2.11's false "clears events" warning).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from jupyter_gpu.measure import (
    Comparison,
    Timing,
    compare,
    synchronize,
    time_back_to_back,
    time_first_call,
    time_steady,
    union_length,
)
from jupyter_gpu.measure import fmt_seconds as format_seconds

__all__ = [
    "Comparison",
    "GpuBusy",
    "Timing",
    "format_seconds",
    "gpu_busy_of",
    "gpu_busy_per_call",
    "profile_calls",
    "synchronize",
    "time_back_to_back",
    "time_calls",
    "time_first_call",
    "time_interleaved",
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


def time_interleaved(
    fns: Mapping[str, Callable[[], object]],
    *,
    rounds: int,
    runs: int,
    warmup: int,
    device: str | torch.device,
) -> Comparison:
    """Time each of ``fns`` in ``rounds`` interleaved rounds of ``runs`` calls back to back.

    The magics' one timing method (:func:`jupyter_gpu.measure.compare`): each variant gets
    ``warmup`` untimed calls (at least one), then every round times a block of ``runs`` calls of
    each, the order reversed every other round. ``result["name"]`` is a variant's
    :class:`Timing` (one per-call time per round); ``result.ratio("name")`` its speedup over
    the first, with its interval (8 rounds or more reach a 95 % interval).

    Raises:
        ValueError: ``rounds`` or ``runs`` < 1, or ``warmup`` < 0.
    """
    if rounds < 1 or runs < 1 or warmup < 0:
        raise ValueError(
            f"need rounds, runs >= 1 and warmup >= 0, got {rounds=}, {runs=}, {warmup=}"
        )
    return compare(fns, device=device, warmup=max(1, warmup), rounds=rounds, calls=runs)


@dataclass(frozen=True)
class GpuBusy:
    """What the GPU ran during one call, on average over the profiled calls."""

    busy_s: float
    """Seconds per call in which at least one kernel ran (overlapping kernels count once)."""
    kernels: float
    """Kernels per call (copies and memsets left out)."""
    calls: int


def profile_calls(fn: Callable[[], object], *, calls: int, activities: Sequence[Any]) -> Any:
    """Run ``fn`` ``calls`` times under one fresh ``torch.profiler.profile``; return the profiler.

    The profiler is made with ``acc_events=True``: it runs one cycle, so keeping events across
    cycles changes nothing, and without it torch 2.10 and 2.11 warn "Profiler clears events at
    the end of each cycle" on every new profiler, a cycle nobody restarted (pytorch#180348, fixed
    in later torch by pytorch#180387), which the extension showed as "a torch.profiler.profile
    object was started again". Kineto's own start and stop lines are kept out of the output
    (:func:`~jupyter_gpu.magics.shell.kineto.kineto_quiet`). CUDA is synchronised before the
    profiler stops, so the calls' GPU work is in it.
    """
    from torch.profiler import profile

    from jupyter_gpu.magics.shell.kineto import kineto_quiet  # here: it loads the magics

    prof = profile(activities=list(activities), acc_events=True)
    with kineto_quiet():
        prof.start()
    try:
        for _ in range(calls):
            fn()
        synchronize()
    finally:
        with kineto_quiet():
            prof.stop()
    return prof


def gpu_busy_per_call(fn: Callable[[], object], *, calls: int = 20) -> GpuBusy | None:
    """Profile ``calls`` calls of ``fn`` on the GPU (``torch.profiler``, CUDA activity only).

    Counts the kernels (not ``record_function`` ranges, copies or memsets) and the time in which
    at least one ran. ``None`` without CUDA. The profiler slows the calls down: time them
    separately.
    """
    if not torch.cuda.is_available():
        return None
    from torch.profiler import ProfilerActivity

    fn()  # not the first call: its one-off work (allocations, autotuning) is not the step's
    synchronize("cuda")
    prof = profile_calls(fn, calls=calls, activities=[ProfilerActivity.CUDA])
    return gpu_busy_of(prof.events(), calls=calls)


def gpu_busy_of(events: Iterable[Any], *, calls: int) -> GpuBusy:
    """What the GPU ran in the profiler events of ``calls`` calls, per call.

    The kernels are the events on the GPU that are not ``record_function`` ranges, copies or
    memsets; the busy time is the union of their intervals (overlapping kernels count once).
    """
    from torch._C._autograd import DeviceType  # what FunctionEvent.device_type holds

    kernels = [
        e
        for e in events
        if e.device_type == DeviceType.CUDA
        and not e.is_user_annotation
        and not any(word in e.name.lower() for word in ("memcpy", "memset"))
    ]
    busy_us = union_length([(e.time_range.start, e.time_range.end) for e in kernels])
    return GpuBusy(busy_s=busy_us / 1e6 / calls, kernels=len(kernels) / calls, calls=calls)
