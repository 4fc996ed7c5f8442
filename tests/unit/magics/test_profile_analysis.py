"""%%profile's reading of a CUDA profile: kernels, ranges, syncs and the GPU's idle time split.

The events are torch's own ``FunctionEvent`` objects laid out by hand on a 1 ms timeline (there
is no GPU in CI), each gap built to fall in one idle category of Holistic Trace Analysis.
tests/gpu/test_profile_explain_gpu.py checks the same on real profiles.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from torch._C._autograd import DeviceType
from torch.autograd.profiler_util import EventList, FunctionEvent

from jupyter_gpu.magics.profile.analysis import analyse, hints
from jupyter_gpu.magics.profile.idle import GpuActivity, idle_breakdown
from jupyter_gpu.magics.profile.syncs import Syncs
from tests.fakes.fake_profile import FakeProfile

Span = tuple[float, float]  # start and end, in µs


def timeline() -> EventList:
    events: list[FunctionEvent] = []
    ids = iter(range(1000, 100_000))

    def event(corr: int, name: str, thread: int, start: float, end: float, **kw: Any) -> None:
        events.append(
            FunctionEvent(corr, name, thread, start, end, use_device="cuda", stack=[], **kw)
        )

    def cpu(name: str, start: float, end: float, corr: int | None = None, **kw: Any) -> None:
        event(corr if corr is not None else next(ids), name, 1, start, end, **kw)

    def gpu(name: str, corr: int, start: float, end: float, **kw: Any) -> None:
        event(corr, name, 7, start, end, device_type=DeviceType.CUDA, device_resource_id=7, **kw)

    def launch(corr: int, call: str, at: Span, work: str, runs: Span) -> None:
        """A runtime ``call`` on the CPU and the ``work`` it queued on the GPU, by one id."""
        cpu(call, *at, corr=corr)
        gpu(work, corr, *runs)

    # the measured step (torch names its event ProfilerStep*, its trace name keeps the number)
    cpu("ProfilerStep*", 0.0, 1000.0, is_user_annotation=True, trace_name="ProfilerStep#0")
    cpu("aten::step", 0.5, 999.0)
    # kernel 101: launched at 10, runs 20-120 (the gap 0-20 waits on the host)
    launch(101, "cudaLaunchKernel", (10.0, 12.0), "gemm_kernel", (20.0, 120.0))
    # kernel 102: queued at 15, runs 125-225: a 5 µs gap between kernels
    launch(102, "cudaLaunchKernel", (15.0, 17.0), "elementwise_kernel", (125.0, 225.0))
    # kernel 103: launched at 400, after the GPU went idle at 225: 185 µs on the host
    launch(103, "cudaLaunchKernel", (400.0, 402.0), "gemm_kernel", (410.0, 500.0))
    # a copy 510-610, then kernel 105 (launched at 506) at 620: 100 µs copies, 20 host
    launch(104, "cudaMemcpyAsync", (505.0, 506.0), "Memcpy HtoD (Pinned -> Device)", (510.0, 610.0))
    launch(105, "cudaLaunchKernel", (506.0, 507.0), "relu_kernel", (620.0, 700.0))
    # kernel 106: queued at 520, waits until 800 (100 µs: other work)
    launch(106, "cudaLaunchKernel", (520.0, 521.0), "gemm_kernel", (800.0, 900.0))
    # 900-1000: nothing queued, the host again (100 µs)
    # syncs: three .item() on CUDA tensors, two explicit synchronize, then the profiler's own
    for t in (300.0, 320.0, 340.0):
        cpu("aten::item", t, t + 10.0)
        cpu("aten::_local_scalar_dense", t + 1.0, t + 9.0)
        cpu("cudaStreamSynchronize", t + 2.0, t + 8.0)
    cpu("cudaDeviceSynchronize", 360.0, 370.0)
    cpu("cudaDeviceSynchronize", 380.0, 390.0)
    cpu("cudaDeviceSynchronize", 1002.0, 1400.0)  # the profiler's own, as it stops
    # .item() on a CPU tensor: an op, no runtime call
    cpu("aten::item", 950.0, 951.0)
    cpu("aten::_local_scalar_dense", 950.2, 950.8)
    # an annotation that spans kernels, on the CPU and its span on the GPU
    cpu("Optimizer.step#AdamW.step", 500.0, 530.0, is_user_annotation=True)
    gpu("Optimizer.step#AdamW.step", 0, 20.0, 700.0, is_user_annotation=True)
    # the profiler's bookkeeping
    gpu("Activity Buffer Request", 0, 0.0, 900.0)
    listed = EventList(sorted(events, key=lambda e: e.time_range.start), use_device="cuda")
    listed._build_tree()
    return listed


def test_kernels_are_kernels_and_annotations_are_ranges() -> None:
    a = analyse(FakeProfile(timeline()), cuda=True, autocast_on=True, cell_names={})
    names = {row.name for row in a.rows}
    assert "Activity Buffer Request" not in names
    assert "Optimizer.step#AdamW.step" not in names
    assert not any(name.startswith("ProfilerStep") for name in names)
    top = max(a.rows, key=lambda row: row.self_gpu_s)
    assert top.name == "gemm_kernel"
    assert a.kernel_count == 5  # not the copy, the annotation nor the bookkeeping
    ranges = {r.name: r for r in a.ranges}
    assert set(ranges) == {"Optimizer.step#AdamW.step"}
    assert ranges["Optimizer.step#AdamW.step"].calls == 1
    assert ranges["Optimizer.step#AdamW.step"].gpu_s == pytest.approx(680e-6)
    assert a.gpu_busy_s == pytest.approx(470e-6)  # kernels only
    assert a.window_s == pytest.approx(1000e-6)


def test_syncs_are_runtime_calls_that_block_not_item_ops() -> None:
    a = analyse(FakeProfile(timeline()), cuda=True, autocast_on=True, cell_names={})
    assert a.syncs.by_call == Counter({"cudaStreamSynchronize": 3, "cudaDeviceSynchronize": 2})
    assert a.syncs.count == 5  # not the profiler's own, not the CPU tensor's .item()
    assert a.syncs.blocked_s == pytest.approx((3 * 6 + 2 * 10) * 1e-6)
    # the profiler's closing synchronize (398 µs) is neither a row nor part of the window
    rows = {row.name: row for row in a.rows}
    assert rows["cudaDeviceSynchronize"].calls == 2


def test_idle_time_is_split_as_hta_does() -> None:
    a = analyse(FakeProfile(timeline()), cuda=True, autocast_on=True, cell_names={})
    idle = {k: round(v * 1e6, 6) for k, v in a.idle_s.items()}
    assert idle == {"host": 325.0, "kernels": 5.0, "copies": 100.0, "other": 100.0}
    assert sum(a.idle_s.values()) + a.gpu_busy_s == pytest.approx(a.window_s)
    assert a.idle_split().startswith("waiting on the host 61%")
    found = hints(a, cuda=True, autocast_on=True)
    assert found
    assert "waiting on the host" in found[0]


@pytest.mark.parametrize(
    ("launched", "gap_us", "kind"),
    [(None, 10.0, "other"), (5.0, 10.0, "kernels"), (5.0, 40.0, "other"), (101.0, 40.0, "host")],
)
def test_one_gap_falls_in_one_category(launched: float | None, gap_us: float, kind: str) -> None:
    us = 1e-6
    first = GpuActivity(0.0, 100 * us, copy=False, launched=0.0)
    second = GpuActivity(
        (100 + gap_us) * us,
        200 * us,
        copy=False,
        launched=None if launched is None else launched * us,
    )
    out = idle_breakdown([first, second], 0.0, 200 * us)
    assert out[kind] == pytest.approx(gap_us * us)
    assert sum(out.values()) == pytest.approx(gap_us * us)


def test_a_copy_heavy_gap_gets_the_copy_hint() -> None:
    us = 1e-6
    acts = [
        GpuActivity(0.0, 10 * us, copy=False, launched=0.0),
        GpuActivity(10 * us, 900 * us, copy=True, launched=1 * us),
        GpuActivity(900 * us, 1000 * us, copy=False, launched=2 * us),
    ]
    out = idle_breakdown(acts, 0.0, 1000 * us)
    assert out["copies"] == pytest.approx(890 * us)


def test_sync_description_names_the_places() -> None:
    syncs = Syncs(Counter({"cudaDeviceSynchronize": 12}), Counter({"cell [4] line 3": 10}))
    text = syncs.describe()
    assert text.startswith("12 device sync(s) (cudaDeviceSynchronize x12)")
    assert "cell [4] line 3 (x10)" in text
    assert "2 not traced to a line" in text


def test_by_gpu_time_the_table_lists_kernels_not_the_ops_that_launched_them() -> None:
    import argparse

    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    from jupyter_gpu.magics.profile.report import show_profile
    from jupyter_gpu.magics.profile.results import ProfileResult

    events = timeline()
    a = analyse(FakeProfile(events), cuda=True, autocast_on=True, cell_names={})
    a.hints = hints(a, cuda=True, autocast_on=True)
    r = ProfileResult(a.rows, a.gpu_idle_fraction, a.hints, 1e-3, None, "self_gpu_s")
    r.steps, r.window_s, r.window = a.steps, a.window_s, "step 1"
    r.kernel_count = a.kernel_count
    args = argparse.Namespace(row_limit=15, memory=False, stack=False, warmup=0, steps=1)
    InteractiveShell.instance()  # the shell that displays the report
    with capture_output() as captured:
        show_profile(r, a, cuda=True, args=args)
    text = captured.outputs[0].data["text/plain"]
    lines = text.splitlines()
    assert lines[0].startswith("top 4 of 4 GPU kernels and copies, by self gpu")
    assert lines[1].startswith("kernel ")
    assert lines[2].startswith("gemm_kernel")
    # A kernel has no CPU time: its CPU columns say so, not "0 µs".
    assert lines[2].split()[2:4] == ["\u2014", "\u2014"], lines[2]
    html = captured.outputs[0].data["text/html"]
    assert "\u2014" in html
    table = text.split("\nGPU idle", 1)[0]
    assert "aten::step" not in table  # ops are in --sort self_cpu's table
    assert "waiting on the host 61%" in text
    assert "GPU idle 53% of the measured run (1.00 ms) (5 kernels)" in text
    assert "5 device sync(s)" in text
    assert "blocked in them 38.0 µs of 1.00 ms" in text
