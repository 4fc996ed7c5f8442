"""The climb's table: each row's gain from its interleaved comparison, with its interval; MFU
against the data-sheet peak and the matmul rate measured here, each under its own name; and the
claim that a row's idle share fits its timed rate."""

import time
from types import SimpleNamespace

import pytest

from jupyter_gpu.measure import Ratio, Timing
from jupyter_gpu.measure.gemms import square_gemm
from jupyter_gpu.measure.matmul_rate import MatmulRate
from jupyter_gpu.tutorials.capstone.climb import Climb, ClimbRow
from jupyter_gpu.tutorials.capstone.steps import (
    StepComparison,
    StepFigures,
    StepWork,
    compare_steps,
)
from jupyter_gpu.tutorials.flops import MODEL_FLOPS_CONVENTION


def figures(*times: float, tokens: int = 1000, flops: float = 1e12) -> StepFigures:
    return StepFigures(Timing(times, 1, 2), tokens, flops, 2**30, None, interleaved=True)


def gain(value: float, low: float, high: float) -> Ratio:
    return Ratio(value, low, high, 8, 0.99)


def row(key: str, *times: float, kept: bool = True, gain_: Ratio | None = None) -> ClimbRow:
    return ClimbRow(key, f"step {key}", figures(*times), batch=4, gain=gain_, kept=kept)


def rate(tflops: float) -> MatmulRate:
    gemm = square_gemm(8192, "bf16")
    return MatmulRate(
        tflops, tflops, tflops, 0.95, 8, 2.0, "CUDA events", "NVIDIA H200", (gemm,), (tflops,)
    )


def comparison(after: StepFigures, before: StepFigures | None, ratio: Ratio | None):
    return StepComparison(after, before, ratio, comparison=None)  # type: ignore[arg-type]


def test_verdicts_come_from_the_interval_not_from_medians() -> None:
    climb = Climb("NVIDIA H200", "bf16")
    climb.add(row("start", 1.0, 1.0, 1.0))
    fast = climb.add(row("fast", 0.5, 0.5, 0.51, gain_=gain(2.0, 1.9, 2.1)))
    same = climb.add(row("same", 0.5, 0.5, 0.5, gain_=gain(1.01, 0.97, 1.04)))
    assert climb.verdict(climb["start"]) == "the starting point"
    assert climb.verdict(fast).startswith("2.00x faster (1.90-2.10x; 99 % interval, 8 rounds)")
    assert climb.verdict(same).startswith("no measurable difference (0.970-1.04x")
    assert climb.speedup(fast) == pytest.approx(2.0)
    # 2 model TFLOP/s over the H200 SXM's dense bf16 peak: 1,979 TFLOP/s with sparsity, halved
    assert climb.mfu(fast).fraction == pytest.approx(2.0 / 989.5)
    assert climb.of_matmul_rate(fast) is None  # not measured yet
    assert "2.00x (1.90-2.10x)" in str(climb)
    with pytest.raises(ValueError, match="already"):
        climb.add(row("fast", 1.0))
    with pytest.raises(KeyError):
        climb.mark_not_kept("nothing", "")


def record_if_faster(climb: Climb, key: str, step_s: float, measured: Ratio) -> ClimbRow:
    """A row recorded with ``keep_if_faster``: its step took ``step_s`` against 1 s before it."""
    return climb.record(
        key,
        key,
        comparison(figures(step_s), figures(1.0), measured),
        batch=4,
        keep_if_faster=True,
    )


def test_a_row_kept_only_if_faster_is_dropped_when_its_interval_holds_one() -> None:
    climb = Climb("NVIDIA H200", "bf16")
    climb.add(row("start", 1.0))
    slow = record_if_faster(climb, "maybe", 0.99, gain(1.01, 0.98, 1.03))
    assert not slow.kept
    assert "not measurably faster" in slow.note
    faster = record_if_faster(climb, "surely", 0.5, gain(2.0, 1.9, 2.1))
    assert faster.kept
    assert climb.before(faster).key == "start"  # the dropped row is not what it started from
    assert climb.last_kept.key == "surely"


def profile(idle: float, syncs: int = 0, steps: int = 2, window_s: float = 0.02):
    return SimpleNamespace(gpu_idle_fraction=idle, sync_count=syncs, steps=steps, window_s=window_s)


def test_the_idle_claim_fails_when_the_rate_while_busy_beats_the_matmul_rate() -> None:
    made = []

    def maker(key: str, statement: str, *, holds: bool, measured: str):
        from jupyter_gpu.tutorials.claims import Claim

        made.append(key)
        return Claim(key, statement, holds, measured)

    climb = Climb("NVIDIA H200", "bf16", rate(10.0), claim_maker=maker)
    # 1 TFLOP a step of 1 s, the GPU idle 50 % of it: 2 TFLOP/s while busy, under 10: it holds
    fits = climb.record("fits", "fits", comparison(figures(1.0), None, None), batch=4,
                        profile=profile(0.5, syncs=4, window_s=2.0))  # fmt: skip
    assert climb.claims["idle_fits_fits"].holds
    assert fits.syncs_per_step == 2.0
    assert fits.profiled_step_s == pytest.approx(1.0)
    assert "✓" in climb.line(fits)
    # 8 TFLOP/s idle 50 %: 16 while busy, above the 10 measured: the idle share cannot be right
    climb.record("bad", "bad", comparison(figures(1 / 8), None, None), batch=4,
                 profile=profile(0.5, window_s=2 / 8))  # fmt: skip
    bad = climb.claims["idle_fits_bad"]
    assert not bad.holds
    assert "16.0 TFLOP/s while busy" in bad.measured
    assert "Not in this run" in climb.line(climb["bad"])
    # an FP8 row is bounded by the FP8 data-sheet peak (1979 TFLOP/s), not the bf16 rate
    climb.record("fp8", "fp8", comparison(figures(1 / 12), None, None), batch=4,
                 profile=profile(0.1, window_s=2 / 12), matmul_dtype="fp8")  # fmt: skip
    assert climb.claims["idle_fits_fp8"].holds
    assert "FP8 peak" in climb.claims["idle_fits_fp8"].statement
    # its share of the matmul rate says that rate is bf16's: 12 of 10 TFLOP/s is no "120 %" of
    # what this GPU's products can do in FP8
    fp8_line = climb.line(climb["fp8"])
    assert "120% of the matmul rate measured here in bf16 (not FP8's)" in fp8_line
    assert "of the data-sheet FP8 peak" in fp8_line
    assert climb.fp8_peak(climb["fp8"]).dense_tflops == pytest.approx(1979.0)
    assert climb.fp8_peak(climb["fits"]) is None
    assert "(not FP8's)" not in climb.line(fits)
    # a row after a kept FP8 row that names no dtype still runs its products in FP8
    after = climb.record("after", "after", comparison(figures(1 / 12), None, None), batch=4,
                         profile=profile(0.1, window_s=2 / 12))  # fmt: skip
    assert after.matmul_dtype == "fp8"
    assert climb.claims["idle_fits_after"].holds
    # no idle share (a CPU): no claim
    climb.record("cpu", "cpu", comparison(figures(1.0), None, None), batch=4, profile=None)
    assert "idle_fits_cpu" not in climb.claims
    assert made == ["idle_fits_fits", "idle_fits_bad", "idle_fits_fp8", "idle_fits_after"]
    with pytest.raises(ValueError, match="claimed already"):
        climb.claim("idle_fits_fits", "again", holds=True, measured="")


def test_the_busy_rate_is_of_the_profiled_step_the_idle_share_describes() -> None:
    # Notebook 07 on the H200, row 11 (8 workers): 562.3 TFLOP/s timed at 930 ms a step; under
    # the profiler 1,748 ms a step, idle 20.3 % of it. The timed rate over (1 - idle) read
    # 705.8 TFLOP/s, above the 685.3 measured; the step's work over its busy time is 374.
    climb = Climb("NVIDIA H200", "bf16", rate(685.3))
    step_s = 0.930
    row = climb.record(
        "workers", "workers",
        comparison(figures(step_s, flops=562.3e12 * step_s), None, None), batch=90,
        profile=profile(0.203, steps=2, window_s=2 * 1.748),
    )  # fmt: skip
    assert row.busy_tflops == pytest.approx(562.3 * 0.930 / (1.748 * (1 - 0.203)), rel=1e-6)
    assert climb.claims["idle_fits_workers"].holds
    assert "1748 ms a profiled step" in climb.claims["idle_fits_workers"].measured
    # The line says the idle share is the profiled steps', which the profiler lengthened.
    assert "the profiler lengthened them 1.9x" in climb.line(row)
    steady = climb.record(
        "steady", "steady", comparison(figures(1.0), None, None), batch=90,
        profile=profile(0.01, steps=2, window_s=2.1),
    )  # fmt: skip
    assert "lengthened" not in climb.line(steady)


def test_table_and_chart_show_every_row() -> None:
    climb = Climb("NVIDIA H200", "bf16", rate(10.0))
    climb.add(row("start", 1.0, 1.1, 0.9))
    climb.add(row("next", 0.5, 0.5, 0.5, kept=False, gain_=gain(2.0, 1.9, 2.1)))
    text = str(climb)
    assert "step next (not kept)" in text
    assert "<table>" in climb._repr_html_()
    chart = climb.chart()
    assert chart.figure["data"][0]["y"] == [1.0, 2.0]
    assert "data-sheet dense bf16 peak 989.5" in chart.title
    assert "the matmul rate measured here 10" in chart.title
    assert climb.of_matmul_rate(climb["start"]) == pytest.approx(0.1)  # 1 of 10 TFLOP/s
    caption = climb.caption()
    assert MODEL_FLOPS_CONVENTION in caption  # MFU never printed without its convention
    assert "989.5 TFLOP/s dense bf16" in caption
    assert "interleaved" in caption
    assert "10%" in climb.line(climb["start"])  # 1 TFLOP/s of the 10 measured
    assert [label for label, _ in climb.section_times()] != []


def test_a_gpu_without_a_data_sheet_peak_shows_no_mfu_and_says_why() -> None:
    climb = Climb("NVIDIA GeForce RTX 4090 Laptop GPU", "bf16")
    climb.add(row("start", 1.0, 1.0, 1.0))
    assert climb.mfu(climb["start"]).fraction is None
    assert "MFU n/a" in climb.line(climb["start"])
    assert "is not in the data-sheet table" in climb.caption()
    assert "no data-sheet peak" in climb.chart().title


def test_compare_steps_times_both_variants_interleaved_and_scales_by_the_work() -> None:
    calls: list[str] = []

    def slow() -> None:
        calls.append("before")
        time.sleep(0.008)

    def quick() -> None:
        calls.append("after")
        time.sleep(0.002)

    measured = compare_steps(
        quick,
        StepWork(100, 2e9),
        before=slow,
        before_work=StepWork(100, 1e9),  # the row after does twice the work per step
        device="cpu",
        min_rounds=8,
        target_s=0.0,
        # blocks of several steps, so one late wake-up on a busy machine moves a block by
        # a fraction of its length rather than turning the 4x per step around
        block_s=0.03,
    )
    assert measured.before is not None
    assert measured.after.interleaved
    assert measured.after.first_step_s is None
    assert measured.comparison.rounds >= 8
    # about 4x faster per step, and twice the FLOPs a step: about 8x the model FLOP/s.
    # With 8 rounds the interval runs from the lowest round to the highest, so its low end
    # above 2 says the row after was faster in every round and the work was scaled in.
    assert measured.gain is not None
    assert measured.gain.low > 2.0
    assert measured.gain.value == pytest.approx(2 * measured.comparison.ratio("after").value)
    # the variants alternate: both ran in the first rounds, not one block of each
    first_after = calls.index("after")
    assert "before" in calls[first_after:]
    alone = compare_steps(quick, StepWork(1, 1.0), device="cpu", min_rounds=2, target_s=0.0)
    assert alone.gain is None
    assert alone.before is None
    with pytest.raises(ValueError, match="min_rounds"):
        compare_steps(quick, StepWork(1, 1.0), device="cpu", min_rounds=0)
