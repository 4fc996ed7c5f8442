"""The climb's table: gains against the last kept row, the verdict against the runs' spread;
MFU against the data-sheet peak and the matmul rate measured here, each under its own name."""

import pytest

from jupyter_gpu.measure import Timing
from jupyter_gpu.measure.gemms import square_gemm
from jupyter_gpu.measure.matmul_rate import MatmulRate
from jupyter_gpu.tutorials.capstone.climb import Climb, ClimbRow
from jupyter_gpu.tutorials.capstone.steps import StepFigures
from jupyter_gpu.tutorials.flops import MODEL_FLOPS_CONVENTION


def figures(*times: float, tokens: int = 1000, flops: float = 1e12) -> StepFigures:
    return StepFigures(Timing(times, 1, 2), tokens, flops, 2**30, times[0])


def row(key: str, *times: float, kept: bool = True) -> ClimbRow:
    return ClimbRow(key, f"step {key}", figures(*times), batch=4, gpu_idle=0.1, kept=kept)


def rate(tflops: float) -> MatmulRate:
    gemm = square_gemm(8192, "bf16")
    return MatmulRate(
        tflops, tflops, tflops, 0.95, 8, 2.0, "CUDA events", "NVIDIA H200", (gemm,), (tflops,)
    )


def test_gains_speedups_and_verdicts() -> None:
    climb = Climb("NVIDIA H200", "bf16")
    climb.add(row("start", 1.0, 1.0, 1.0))
    climb.add(row("fast", 0.5, 0.5, 0.51))
    slow = climb.add(row("slow", 0.6, 0.6, 0.6))
    climb.mark_not_kept("slow", "Slower here")
    same = climb.add(row("same", 0.5, 0.5, 0.5))
    assert climb.speedup(climb["fast"]) == pytest.approx(2.0)
    # 2 model TFLOP/s over the H200 SXM's dense bf16 peak: 1,979 TFLOP/s with sparsity, halved
    assert climb.mfu(climb["fast"]).fraction == pytest.approx(2.0 / 989.5)
    assert climb.of_matmul_rate(climb["fast"]) is None  # not measured yet
    assert climb.verdict(climb["start"]) == "the starting point"
    assert climb.verdict(climb["fast"]).startswith("helped: +100.0%")
    assert climb.verdict(slow).startswith("slower")
    # "same" is compared with "fast", the last kept row, not with the dropped "slow" one
    assert climb.before(same).key == "fast"
    assert climb.verdict(same).startswith("no change beyond the runs' spread")
    assert climb.last_kept.key == "same"
    assert climb.best_kept.key in ("fast", "same")
    assert not climb["slow"].kept
    assert "Slower here" in climb.line(climb["slow"])
    with pytest.raises(ValueError, match="already"):
        climb.add(row("fast", 1.0))
    with pytest.raises(KeyError):
        climb.mark_not_kept("nothing", "")


def test_table_and_chart_show_every_row() -> None:
    climb = Climb("NVIDIA H200", "bf16", rate(10.0))
    climb.add(row("start", 1.0, 1.1, 0.9))
    climb.add(row("next", 0.5, 0.5, 0.5, kept=False))
    text = str(climb)
    assert "step next (not kept)" in text
    assert "909-1,111" in text  # tokens/s of the slowest and fastest runs
    assert "<table>" in climb._repr_html_()
    chart = climb.chart()
    assert chart.figure["data"][0]["y"] == [1.0, 2.0]
    assert "data-sheet dense bf16 peak 989.5" in chart.title
    assert "the matmul rate measured here 10" in chart.title
    assert climb.of_matmul_rate(climb["start"]) == pytest.approx(0.1)  # 1 of 10 TFLOP/s
    caption = climb.caption()
    assert MODEL_FLOPS_CONVENTION in caption  # MFU never printed without its convention
    assert "989.5 TFLOP/s dense bf16" in caption
    assert "of matmul rate: model TFLOP/s over the matmul rate measured here: 10.0" in caption
    assert "10%" in climb.line(climb["start"])  # 1 TFLOP/s of the 10 measured


def test_a_gpu_without_a_data_sheet_peak_shows_no_mfu_and_says_why() -> None:
    climb = Climb("NVIDIA GeForce RTX 4090 Laptop GPU", "bf16")
    climb.add(row("start", 1.0, 1.0, 1.0))
    assert climb.mfu(climb["start"]).fraction is None
    assert "MFU n/a" in climb.line(climb["start"])
    assert "is not in the data-sheet table" in climb.caption()
    assert "no data-sheet peak" in climb.chart().title
