"""Notebook 07's section 19: %tune's fixes beside the climb's rows, each said against what."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from jupyter_gpu.magics.tune.results import FixResult, NotTried, Suggestion, TuneResult
from jupyter_gpu.measure.interval import Ratio
from jupyter_gpu.tutorials.capstone.beside import beside, row_key


def _row(key: str, label: str, gain: Ratio | None, kept: bool = True) -> Any:
    return SimpleNamespace(key=key, label=label, gain=gain, kept=kept)


def _first_rows() -> list[Any]:
    """The climb's first four rows, which both tests start from: the start, TF32, autocast, SDPA."""
    return [
        _row("start", "0 · the start", None),
        _row("tf32", "1 · TF32", Ratio(2.0, 1.9, 2.1, 12, 0.95)),
        _row("autocast", "2 · bf16 autocast", Ratio(3.0, 2.9, 3.1, 12, 0.95)),
        _row("sdpa", "3 · scaled_dot_product_attention", Ratio(1.5, 1.4, 1.6, 12, 0.95)),
    ]


def _climb(rows: list[Any]) -> Any:
    def before(row: Any) -> Any:
        at = rows.index(row)
        kept = [r for r in rows[:at] if r.kept]
        return kept[-1] if kept else None

    return SimpleNamespace(rows=rows, start=rows[0], before=before)


def _fix(name: str, ratio: Ratio, kept: bool = True) -> FixResult:
    interval = (ratio.low, ratio.high)
    return FixResult(name, "x", ratio.value, interval, None, 0.0, kept, "", "kept", ratio)


def test_each_row_says_what_it_and_tunes_figure_were_measured_against() -> None:
    climb = _climb(
        [
            *_first_rows(),
            _row("no-item", "6 · no .item() each step", Ratio(1.1, 1.05, 1.2, 12, 0.95)),
            _row("shape", "7 · shape", Ratio(1.1, 1.05, 1.2, 12, 0.95)),
            _row("pipeline", "11 · 8 workers", Ratio(1.3, 1.2, 1.4, 12, 0.95)),
        ]
    )
    tuned = TuneResult(
        "tune_step()",
        "cuda",
        fixes=[
            _fix("TF32 matmuls and convolutions", Ratio(2.05, 1.95, 2.2, 12, 0.95)),
            _fix("bf16 autocast", Ratio(6.0, 5.8, 6.2, 12, 0.95)),
        ],
        not_tried=[NotTried("input pipeline", "the DataLoader's __next__ took 2% of the steps")],
        suggestions=[Suggestion("scaled_dot_product_attention", "hand-written attention: 12")],
    )
    lines = {b.label: b for b in beside(tuned, climb)}
    assert "0 · the start" not in lines
    tf32 = lines["1 · TF32"]
    assert (tf32.same_baseline, tf32.overlap) == (True, True)
    assert "against the start" in tf32.climb
    assert "the same baseline, the intervals overlap" in tf32.line()
    bf16 = lines["2 · bf16 autocast"]
    assert "against row '1 · TF32'" in bf16.climb
    assert not bf16.same_baseline  # %tune's autocast on top of nothing, the climb's on TF32
    assert "different baselines" in bf16.line()
    assert "suggests it" in lines["3 · scaled_dot_product_attention"].tune
    assert "did not suggest it" in lines["6 · no .item() each step"].tune
    assert "has no fix for it (the model's shape is its code" in lines["7 · shape"].tune
    assert "not tried: the DataLoader's __next__ took 2%" in lines["11 · 8 workers"].tune


def test_tunes_fix_on_top_of_the_rows_above_shares_the_climbs_baseline() -> None:
    climb = _climb(
        [
            *_first_rows(),
            _row("compile", "4 · torch.compile", Ratio(1.3, 1.2, 1.4, 12, 0.95)),
        ]
    )
    tf32 = "TF32 matmuls and convolutions"
    tuned = TuneResult(
        "tune_step()",
        "cuda",
        fixes=[
            _fix(tf32, Ratio(2.05, 1.95, 2.2, 12, 0.95)),
            replace(_fix("bf16 autocast", Ratio(2.8, 2.7, 2.95, 12, 0.95)), on_top_of=(tf32,)),
            replace(
                _fix("torch.compile", Ratio(1.3, 1.2, 1.4, 12, 0.95)),
                on_top_of=(tf32, "bf16 autocast"),
            ),
        ],
    )
    lines = {b.label: b for b in beside(tuned, climb)}
    bf16 = lines["2 · bf16 autocast"]
    assert (bf16.same_baseline, bf16.overlap) == (True, True)
    assert f"against the start with {tf32}" in bf16.tune
    assert "the same baseline, the intervals overlap" in bf16.line()
    # The climb compiled after SDPA, a code change %tune only suggests: another step.
    compiled = lines["4 · torch.compile"]
    assert not compiled.same_baseline
    assert "different baselines" in compiled.line()


def test_tunes_fix_names_map_to_the_climbs_rows() -> None:
    assert row_key("TF32 matmuls and convolutions") == "tf32"
    assert row_key("fp16 autocast") == "autocast"
    assert row_key("torch.compile") == "compile"
    assert row_key("torch.compile reduce-overhead") == "cuda-graphs"
    assert row_key("torch.compile max-autotune-no-cudagraphs") == "autotune"
    assert row_key("fused optimizer") == "fused"
    assert row_key("input pipeline") == "pipeline"
    assert row_key("channels_last") is None
