"""Counting CUDA-graph replays and single kernel launches among profiler event names."""

from __future__ import annotations

import pytest
import torch

from jupyter_gpu.tutorials.step_launches import count_launches, step_launches


def test_graph_replays_and_single_launches_are_told_apart() -> None:
    names = [
        "cudaGraphLaunch",
        "cudaGraphLaunch",
        "cudaLaunchKernel",
        "cuLaunchKernel",  # Triton's kernels, through the driver
        "cuLaunchKernelEx",
        "cudaLaunchKernelExC",
        "cudaMemcpyAsync",  # a copy, not a kernel launch
        "aten::mm",
    ]
    assert count_launches(names) == (2, 4)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU profiles: tests/gpu covers it")
def test_no_cuda_no_profile() -> None:
    assert step_launches(lambda: None, calls=2) is None


def test_gpu_busy_counts_kernels_only_and_overlaps_once() -> None:
    """What step_launches and gpu_busy_per_call read from the events: one helper for both."""
    from types import SimpleNamespace

    from torch._C._autograd import DeviceType

    from jupyter_gpu.tutorials.timing import gpu_busy_of

    def event(
        name: str,
        start_us: float,
        end_us: float,
        *,
        on: object = DeviceType.CUDA,
        range_: bool = False,
    ) -> SimpleNamespace:
        span = SimpleNamespace(start=start_us, end=end_us)
        return SimpleNamespace(
            name=name, time_range=span, device_type=on, is_user_annotation=range_
        )

    events = [
        event("gemm", 0.0, 20.0),
        event("add", 10.0, 30.0),  # overlaps the gemm: 10 µs counted once
        event("Memcpy HtoD", 40.0, 90.0),
        event("Memset", 40.0, 90.0),
        event("aten::mm", 0.0, 100.0, on=DeviceType.CPU),
        event("my_range", 0.0, 100.0, range_=True),  # a record_function range on the GPU
    ]
    busy = gpu_busy_of(events, calls=2)
    assert busy.kernels == 1.0  # two kernels over two calls
    assert busy.busy_s == pytest.approx(15e-6)  # 30 µs over two calls
    assert busy.calls == 2
