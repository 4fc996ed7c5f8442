"""%%profile's idle window against ground truth: the analysis of synthetic traces.

The traces are the ground-truth loop of ``benchmarks/idle_ground_truth.py`` laid out by hand
(``tests/fakes/synthetic_trace.py``): per step a 2 ms kernel, a synchronize that returns when it
ends, then host work of a known length, so the true idle share of a step is known exactly. On
the H200 the benchmark runs the same loop for real; here the analysis must read the truth from
the events, at 2 steps as at 20.
"""

from __future__ import annotations

import pytest

from jupyter_gpu.magics.profile.analysis import analyse
from jupyter_gpu.magics.profile.idle import GpuActivity, StepSpan, first_to_last_idle, step_window
from tests.fakes.fake_profile import FakeProfile
from tests.fakes.synthetic_trace import SyntheticTrace, ground_truth_loop

KERNEL_US = 2000.0
#: Host work after each kernel for a true idle share of 25, 50 and 75 % (S = K f / (1 - f)).
HOST_US = {0.25: KERNEL_US / 3, 0.5: KERNEL_US, 0.75: 3 * KERNEL_US}


@pytest.mark.parametrize("steps", [2, 20])
@pytest.mark.parametrize("target", [0.25, 0.5, 0.75])
def test_idle_over_whole_steps_reads_the_true_share(target: float, steps: int) -> None:
    trace, true = ground_truth_loop(steps, KERNEL_US, HOST_US[target])
    a = analyse(FakeProfile(trace.events()), cuda=True, autocast_on=False, cell_names={})
    assert a.steps == steps
    assert a.gpu_idle_fraction == pytest.approx(true, abs=0.001)  # 0.1 points
    assert true == pytest.approx(target, abs=0.005)
    assert a.kernel_count == steps
    # it waits on the host (the next launch comes after the host's work), but for the 6 µs
    # from the window's start to the first kernel, queued by then: launch overhead, "between
    # kernels" as in HTA
    assert a.idle_s["host"] / sum(a.idle_s.values()) > 0.99
    assert a.idle_s["kernels"] == pytest.approx(6e-6)
    assert a.window is not None
    assert a.window.span_text() == f"steps 2 to {steps + 1}"  # after one warm-up run


def test_start_up_and_the_profilers_closing_sync_are_outside_the_window() -> None:
    trace, _ = ground_truth_loop(2, KERNEL_US, KERNEL_US, closing_sync_us=5000.0)
    trace.cpu("aten::empty", -900.0, -850.0)  # before the first step: start-up
    a = analyse(FakeProfile(trace.events()), cuda=True, autocast_on=False, cell_names={})
    period = 6.0 + KERNEL_US + 2.0 + KERNEL_US + 2.0
    assert a.window_s == pytest.approx((2 * period - 1.0) * 1e-6)
    assert a.syncs.count == 2  # the steps' own, not the profiler's 5 ms one
    names = {row.name for row in a.rows}
    assert "aten::empty" not in names
    assert a.gpu_idle_fraction == pytest.approx(0.5, abs=0.002)


def test_a_step_whose_gpu_work_outlasts_its_cpu_range_ends_the_window_there() -> None:
    # an asynchronous step: the launch returns at once, the kernel runs on after the range
    trace = SyntheticTrace()
    for step, t in ((1, 0.0), (2, 100.0)):
        trace.step(step, t, t + 20.0)
        trace.launch(t + 1.0, (t + 10.0, t + 90.0))
    a = analyse(FakeProfile(trace.events()), cuda=True, autocast_on=False, cell_names={})
    assert a.window is not None
    assert a.window.end_s == pytest.approx(190e-6)  # the last kernel's end, not 120 µs
    assert a.window_s == pytest.approx(190e-6)
    assert a.gpu_busy_s == pytest.approx(160e-6)


def test_work_queued_before_the_first_step_is_busy_time_but_not_its_end() -> None:
    us = 1e-6
    steps = [StepSpan(1, 100 * us, 200 * us)]
    warmup_tail = GpuActivity(50 * us, 150 * us, copy=False, launched=10 * us)
    late = GpuActivity(300 * us, 400 * us, copy=False, launched=250 * us)  # launched after it
    window = step_window(steps, [warmup_tail, late])
    assert window is not None
    assert (window.start_s, window.end_s) == pytest.approx((100 * us, 200 * us))


def test_first_to_last_gpu_activity_undercounts_idle_between_steps() -> None:
    # HTA's temporal breakdown window: N kernels of K with N - 1 gaps of G between them reads
    # (N-1)G / (NK + (N-1)G): about 14 % at 2 steps for a true 25 %, 24 % at 20
    for steps, about in ((2, 0.14), (20, 0.24)):
        trace, true = ground_truth_loop(steps, KERNEL_US, HOST_US[0.25])
        a = analyse(FakeProfile(trace.events()), cuda=True, autocast_on=False, cell_names={})
        gap = true * KERNEL_US / (1 - true)  # a period less its kernel
        expected = (steps - 1) * gap / (steps * KERNEL_US + (steps - 1) * gap)
        span = first_to_last_idle(a.activity)
        assert span == pytest.approx(expected, abs=1e-4)
        assert span == pytest.approx(about, abs=0.01)
        assert a.gpu_idle_fraction == pytest.approx(true, abs=0.001)


def test_a_warm_up_runs_gpu_tail_is_busy_time_in_the_first_step() -> None:
    # the warm-up run launched a kernel that was still running when the first step began
    trace = SyntheticTrace()
    trace.launch(-50.0, (-10.0, 40.0), name="warmup_kernel")
    trace.step(1, 0.0, 100.0)
    trace.launch(1.0, (50.0, 90.0), name="step_kernel")
    a = analyse(FakeProfile(trace.events()), cuda=True, autocast_on=False, cell_names={})
    assert a.window_s == pytest.approx(100e-6)
    assert a.gpu_busy_s == pytest.approx(80e-6)  # 0-40 the warm-up's tail, 50-90 the step's
    assert a.kernel_count == 1  # the step's own
    assert {row.name for row in a.rows if row.on_gpu} == {"step_kernel"}
