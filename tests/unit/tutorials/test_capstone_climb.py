"""The climb's table: gains against the last kept row, the verdict against the runs' spread."""

import pytest

from jupyter_gpu.measure import Timing
from jupyter_gpu.tutorials.capstone.climb import Climb, ClimbRow
from jupyter_gpu.tutorials.capstone.steps import Ceiling, StepFigures


def figures(*times: float, tokens: int = 1000, flops: float = 1e12) -> StepFigures:
    return StepFigures(Timing(times, 1, 2), tokens, flops, 2**30, times[0])


def row(key: str, *times: float, kept: bool = True) -> ClimbRow:
    return ClimbRow(key, f"step {key}", figures(*times), batch=4, gpu_idle=0.1, kept=kept)


def test_gains_speedups_and_verdicts() -> None:
    climb = Climb(Ceiling("bf16", 10.0, 8192))
    climb.add(row("start", 1.0, 1.0, 1.0))
    climb.add(row("fast", 0.5, 0.5, 0.51))
    slow = climb.add(row("slow", 0.6, 0.6, 0.6))
    climb.mark_not_kept("slow", "Slower here")
    same = climb.add(row("same", 0.5, 0.5, 0.5))
    assert climb.speedup(climb["fast"]) == pytest.approx(2.0)
    assert climb.mfu(climb["fast"]) == pytest.approx(0.2)  # 2 TFLOP/s of a 10 TFLOP/s ceiling
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
    climb = Climb(Ceiling("bf16", 10.0, 8192))
    climb.add(row("start", 1.0, 1.1, 0.9))
    climb.add(row("next", 0.5, 0.5, 0.5, kept=False))
    text = str(climb)
    assert "step next (not kept)" in text
    assert "909-1,111" in text  # tokens/s of the slowest and fastest runs
    assert "<table>" in climb._repr_html_()
    chart = climb.chart()
    assert chart.figure["data"][0]["y"] == [1.0, 2.0]
    assert "bf16 matmul" in chart.title
