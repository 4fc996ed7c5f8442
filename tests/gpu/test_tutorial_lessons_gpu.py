"""Notebooks 00 and 01's new lessons on a real GPU (about a minute and a half on an H200).

    python3 -m pytest -m gpu tests/gpu/test_tutorial_lessons_gpu.py -x -q

1. ``gpu_busy_per_call`` (notebook 01) makes no "Profiler clears events" warning: torch 2.10
   and 2.11 warn it from every fresh profiler without ``acc_events`` (pytorch#180348), which the
   extension showed as "a torch.profiler.profile object was started again".
2. CUDA_LAUNCH_BLOCKING (00): launches are measurably slower with it, in two fresh processes
   timed in turns; the asynchronous error surfaces after its line without it, at it with it.
3. The roofline (00): a device copy's bandwidth, an elementwise add near it (memory-bound), a
   matmul at batch 32 below the ridge, a square one above it.
4. A reduce-overhead training step (01): more than one CUDA graph replayed (forward, backward),
   the loss's and AdamW's kernels launched one by one.
5. ``TORCH_LOGS="output_code"`` and ``TORCH_TRACE`` on a GPU (01): Triton kernels, their head
   from ``@triton.jit``, a trace with the compile's records.
6. Exercise 8.1's check with inductor on the GPU: the safe torch.where accepted, the plain one
   (NaN gradient on a constant input) rejected.

Figures go to ``$JUPYTER_GPU_OUT/tutorial_lessons_gpu.json`` (or ``$OUT``) when set.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu


def test_gpu_busy_per_call_gives_no_clears_events_warning(figures: dict[str, Any]) -> None:
    import torch

    from jupyter_gpu.tutorials.timing import gpu_busy_per_call

    x = torch.randn(1024, 1024, device="cuda")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        busy = gpu_busy_per_call(lambda: x @ x, calls=5)
        busy_again = gpu_busy_per_call(lambda: x @ x, calls=5)  # a second fresh profiler too
    assert [str(w.message) for w in seen if "clears events" in str(w.message)] == []
    assert busy is not None
    assert busy_again is not None
    assert busy.kernels >= 1
    assert busy.busy_s > 0
    figures["matmul_1024_busy_us"] = busy.busy_s * 1e6


def test_launch_blocking_costs_and_moves_the_error_to_its_line(figures: dict[str, Any]) -> None:
    from jupyter_gpu.tutorials.launch_blocking import error_location, launch_blocking_cost

    cost = launch_blocking_cost(device="cuda", rounds=8, launches=2000)
    figures["launch_us_default"] = cost.default.median_s * 1e6
    figures["launch_us_blocking"] = cost.blocking.median_s * 1e6
    figures["launch_blocking_ratio"] = [cost.ratio.value, cost.ratio.low, cost.ratio.high]
    assert cost.ratio.slower, cost.describe()
    default = error_location(device="cuda", blocking=False)
    blocking = error_location(device="cuda", blocking=True)
    figures["error_lines"] = {
        "fault": default.fault_line,
        "default": default.raised_line,
        "blocking": blocking.raised_line,
    }
    assert blocking.at_the_fault, blocking
    assert default.raised_line is not None
    assert default.raised_line > default.fault_line, default
    assert "device-side assert" in default.error or "CUDA error" in default.error


def test_the_roofline_places_the_kernels_where_the_lesson_says(figures: dict[str, Any]) -> None:
    import torch

    from jupyter_gpu.tutorials.roofline import (
        Roof,
        add_workload,
        copy_workload,
        matmul_workload,
        measure_points,
    )

    workloads = [
        copy_workload(2**28, torch.float32, "cuda"),
        matmul_workload(8192, 8192, 8192, torch.bfloat16, "cuda"),
        add_workload(2**26, torch.float32, "cuda"),
        matmul_workload(32, 8192, 8192, torch.bfloat16, "cuda"),
    ]
    copy, square, add, batch32 = measure_points(workloads, device="cuda", rounds=10)
    roof = Roof(copy.bytes_per_s, square.flops_per_s)
    figures["roofline"] = {
        "copy_gb_s": copy.bytes_per_s / 1e9,
        "square_tflops": square.flops_per_s / 1e12,
        "ridge": roof.ridge,
        "add_gb_s": add.bytes_per_s / 1e9,
        "batch32_tflops": batch32.flops_per_s / 1e12,
        "batch32_gb_s": batch32.bytes_per_s / 1e9,
    }
    assert 100e9 < copy.bytes_per_s < 10e12  # a GPU's memory, not a cache's or a bug's
    assert roof.bound(add.intensity) == "memory-bound"
    assert add.bytes_per_s >= 0.7 * copy.bytes_per_s
    assert batch32.intensity < roof.ridge < square.intensity
    assert batch32.flops_per_s <= 1.2 * roof.attainable(batch32.intensity)  # under its roof


def test_a_reduce_overhead_step_replays_two_graphs_and_launches_the_rest(
    figures: dict[str, Any],
) -> None:
    import torch
    import torch.nn.functional as F

    from jupyter_gpu.tutorials.mlp import launch_bound_mlp
    from jupyter_gpu.tutorials.step_launches import step_launches

    torch.manual_seed(0)
    torch._dynamo.reset()
    mlp = launch_bound_mlp(width=1024, depth=24).cuda()
    opt = torch.optim.AdamW(mlp.parameters(), lr=1e-3, fused=True)
    compiled = torch.compile(mlp, mode="reduce-overhead")
    x = torch.randn(32, 1024, device="cuda")
    y = torch.randint(0, 10, (32,), device="cuda")

    def step() -> None:
        torch.compiler.cudagraph_mark_step_begin()
        loss = F.cross_entropy(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):  # CUDA graphs record on the 2nd or 3rd call
        step()
    launches = step_launches(step, calls=20)
    assert launches is not None
    figures["reduce_overhead_step"] = {
        "graph_launches": launches.graph_launches,
        "kernel_launches": launches.kernel_launches,
        "kernels": launches.kernels,
        "gpu_busy_us": launches.gpu_busy_s * 1e6,
    }
    assert launches.graph_launches >= 2
    assert launches.kernel_launches >= 1
    assert launches.kernels > launches.kernel_launches  # the graphs' kernels ran too


def test_output_code_and_torch_trace_on_a_gpu(figures: dict[str, Any], tmp_path: Path) -> None:
    from jupyter_gpu.tutorials.compile_logs import compile_with_logs, first_kernel

    logs = compile_with_logs("cuda", parent=str(tmp_path))
    figures["output_code"] = {
        "kernels": logs.kernels,
        "seconds": logs.seconds,
        "trace_records": logs.trace.records,
        "trace_kinds": dict(logs.trace.kinds),
    }
    assert logs.kernels
    assert all(k.startswith("triton_") for k in logs.kernels)
    assert first_kernel(list(logs.code))[0].strip() == "@triton.jit"
    assert dict(logs.trace.kinds).get("inductor_output_code", 0) >= 1


def test_exercise_8_1_with_inductor_on_the_gpu() -> None:
    import logging

    import torch

    from jupyter_gpu.tutorials.checks_01 import check_standardize
    from tests.tutorial_solutions import Standardize, StandardizePlainWhere, StandardizeSafeWhere

    torch._dynamo.reset()
    torch._logging.set_logs(dynamo=logging.ERROR)  # type: ignore[attr-defined]
    try:
        accepted = check_standardize(
            StandardizeSafeWhere, Standardize, backend="inductor", device="cuda"
        )
        rejected = check_standardize(
            StandardizePlainWhere, Standardize, backend="inductor", device="cuda"
        )
    finally:
        torch._logging.set_logs()  # type: ignore[attr-defined]
    assert accepted, accepted.message
    assert not rejected
    assert "gradient is not finite" in rejected.message
