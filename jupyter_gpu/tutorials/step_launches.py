"""How a training step reaches the GPU: CUDA-graph replays, kernels launched one by one, busy time.

Notebook 01 uses it on a ``reduce-overhead`` step. torch.compile's CUDA graphs cover what it
compiled, one graph per compiled graph: in training the forward and the backward are separate
graph captures (PyTorch's *CUDAGraph Trees* notes, ``torch.compiler_cudagraph_trees``), and
what the step runs outside the compiled module (a loss computed after it, ``optimizer.step()``)
still launches its kernels one by one. :func:`step_launches` counts both from a profile of a few
steps: the CUDA runtime's and driver's launch calls that the profiler records on the CPU side
(``cudaGraphLaunch`` for a graph replay; ``cudaLaunchKernel``, ``cuLaunchKernel`` and their
``Ex`` forms for a single kernel), and the kernels that ran on the GPU, with the time in which
at least one ran.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from .timing import gpu_busy_of, profile_calls, synchronize

__all__ = ["GRAPH_LAUNCHES", "KERNEL_LAUNCHES", "StepLaunches", "count_launches", "step_launches"]

#: Runtime and driver calls that replay a whole CUDA graph.
GRAPH_LAUNCHES = frozenset(("cudaGraphLaunch", "cuGraphLaunch"))
#: Runtime and driver calls that launch one kernel (Triton's kernels go through the driver's).
KERNEL_LAUNCHES = frozenset(
    (
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
    )
)


def count_launches(names: Iterable[str]) -> tuple[int, int]:
    """``(graph replays, single kernel launches)`` among profiler event names."""
    graphs = kernels = 0
    for name in names:
        if name in GRAPH_LAUNCHES:
            graphs += 1
        elif name in KERNEL_LAUNCHES:
            kernels += 1
    return graphs, kernels


@dataclass(frozen=True)
class StepLaunches:
    """Per step, averaged over ``calls`` profiled steps.

    Attributes:
        graph_launches: CUDA graphs replayed (``cudaGraphLaunch``).
        kernel_launches: kernels launched one by one, outside any graph.
        kernels: kernels that ran on the GPU, in graphs or not (copies and memsets left out).
        gpu_busy_s: seconds in which at least one kernel ran.
        calls: how many steps were profiled.
    """

    graph_launches: float
    kernel_launches: float
    kernels: float
    gpu_busy_s: float
    calls: int


def step_launches(fn: Callable[[], object], *, calls: int = 20) -> StepLaunches | None:
    """Profile ``calls`` calls of ``fn`` (CPU and CUDA activity); ``None`` without CUDA.

    ``fn`` runs once first, unprofiled (its one-off work is not the step's). The profiler slows
    the calls: time them separately.
    """
    if not torch.cuda.is_available():
        return None
    from torch.profiler import ProfilerActivity

    fn()
    synchronize("cuda")
    prof = profile_calls(fn, calls=calls, activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    events = list(prof.events())
    graphs, launches = count_launches(e.name for e in events)
    busy = gpu_busy_of(events, calls=calls)
    return StepLaunches(
        graph_launches=graphs / calls,
        kernel_launches=launches / calls,
        kernels=busy.kernels,
        gpu_busy_s=busy.busy_s,
        calls=calls,
    )
