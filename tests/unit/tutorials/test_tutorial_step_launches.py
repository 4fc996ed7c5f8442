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
