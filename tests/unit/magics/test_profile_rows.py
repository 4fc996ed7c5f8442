"""%%profile's per-op totals equal torch's own ``key_averages()``, float for float.

The events are torch's ``FunctionEvent`` objects built by hand in the shape a CUDA profile
parses into (CPU ops nested on two threads, kernels attached to the ops that launched them,
kernel events on a GPU lane, an async op, a legacy event, an annotation recorded on both the
CPU and the GPU): there is no GPU in CI. tests/gpu/test_magics_gpu.py compares real ones.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from torch._C._autograd import DeviceType
from torch.autograd.profiler_util import EventList, FunctionEvent

from jupyter_gpu.magics.profile.analysis import analyse
from jupyter_gpu.magics.profile.rows import OpTotals, device_kind, rows_from_key_averages
from tests.fakes.fake_profile import FakeProfile


def cuda_like_events(seed: int, use_device: str | None = "cuda") -> EventList:
    rng = random.Random(seed)
    events: list[FunctionEvent] = []
    next_id = iter(range(1, 100_000))

    def op(name: str, thread: int, start: float, end: float, **kw: Any) -> FunctionEvent:
        evt = FunctionEvent(
            next(next_id), name, thread, start, end, use_device=use_device, stack=[], **kw
        )
        events.append(evt)
        return evt

    def kernel(parent: FunctionEvent, name: str, start: float) -> None:
        duration = rng.uniform(0.5, 40.0)
        parent.append_kernel(name, 0, duration)
        events.append(
            FunctionEvent(
                next(next_id),
                name,
                7,
                start,
                start + duration,
                use_device=use_device,
                stack=[],
                device_type=DeviceType.CUDA,
                device_resource_id=7,
            )
        )

    t = 0.0
    for step in range(6):
        # the step's range, as profile.step() opens it: torch names the event ProfilerStep*
        # and keeps the number in its trace name
        op(
            "ProfilerStep*",
            1,
            t - 0.5,
            t + 155.0,
            is_user_annotation=True,
            trace_name=f"ProfilerStep#{step}",
        )
        for thread in (1, 2):
            outer = op("aten::linear", thread, t, t + 100.0, cpu_memory_usage=4096)
            inner = op("aten::addmm", thread, t + 5.0, t + 60.0, device_memory_usage=1 << 20)
            op("cudaLaunchKernel", thread, t + 10.0, t + 12.5)
            kernel(inner, "sm80_gemm", t + 20.0)
            kernel(inner, "sm80_gemm", t + 50.0)
            op("aten::relu", thread, t + 61.0, t + 99.0, device_memory_usage=-(1 << 10))
            kernel(outer, "elementwise_kernel", t + 70.0 + rng.random())
            op("Optimizer.step#AdamW.step", thread, t + 100.5, t + 140.0, is_user_annotation=True)
            events.append(
                FunctionEvent(
                    next(next_id),
                    "Optimizer.step#AdamW.step",
                    7,
                    t + 101.0,
                    t + 139.0,
                    use_device=use_device,
                    stack=[],
                    device_type=DeviceType.CUDA,
                    is_user_annotation=True,
                )
            )
        op("aten::to", 3, t + 1.0, t + 30.0, is_async=True)
        op("legacy_op", 1, t + 141.0, t + 150.0, is_legacy=True).append_kernel("k", 0, 3.25)
        kernel(op("aten::fill_", 1, t + 142.0, t + 145.0), "fill_kernel", t + 143.0)
        op("[memory]", 1, t + 151.0, t + 151.0, cpu_memory_usage=512)
        t += 160.0 + rng.random()
    listed = EventList(events, use_device=use_device)
    listed._build_tree()  # what torch does before it hands events out
    return listed


@pytest.mark.parametrize("use_device", ["cuda", None])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_totals_equal_key_averages_exactly(seed: int, use_device: str | None) -> None:
    events = cuda_like_events(seed, use_device)
    totals = OpTotals.for_events(events)
    assert totals is not None
    for evt in events:
        totals.add(evt, device_kind(evt))
    ours = totals.rows({})
    torchs = rows_from_key_averages(FakeProfile(events), {})
    assert ours == torchs  # same rows, same order, the same floats to the last bit
    names = [row.name for row in ours]
    assert "Optimizer.step#AdamW.step" not in names  # an annotation is a range, not an op
    assert "[memory]" not in names
    assert not any(name.startswith("ProfilerStep") for name in names)
    if use_device:
        addmm = next(row for row in ours if row.name == "aten::addmm")
        assert addmm.self_gpu_s > 0  # kernels attached to the op count as its GPU time
    else:
        assert all(row.gpu_s == 0 for row in ours)


def test_analysis_rows_and_gpu_figures() -> None:
    events = cuda_like_events(3)
    analysis = analyse(FakeProfile(events), cuda=True, autocast_on=False, cell_names={})
    assert analysis.rows == rows_from_key_averages(FakeProfile(events), {})
    gemms = [e for e in events if e.name == "sm80_gemm" and e.device_type == DeviceType.CUDA]
    assert analysis.kernel_count == len(gemms) + 12 + 6  # elementwise, fill; no annotation
    assert analysis.gpu_busy_s is not None
    assert analysis.gpu_busy_s > 0
    lanes = {bar.lane for bar in analysis.bars}
    assert lanes == {"GPU 0 stream 7", "CPU thread 0", "CPU thread 1", "ranges", "steps"}
    assert analysis.steps == 6
    quiet = analyse(
        FakeProfile(events), cuda=True, autocast_on=False, cell_names={}, timeline=False
    )
    assert quiet.bars == []
    assert quiet.window_s == analysis.window_s
    assert quiet.gpu_idle_fraction == analysis.gpu_idle_fraction


def test_events_without_a_needed_field_use_key_averages() -> None:
    class Old:  # an event from a torch that lacks fields OpTotals reads
        name = "aten::mm"

    assert OpTotals.for_events([Old()]) is None
