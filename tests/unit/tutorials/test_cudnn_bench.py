"""Notebook 02's cudnn.benchmark measurement: rounds of fresh processes, paired as the one timing
method pairs rounds; the process itself runs here on the CPU (cuDNN plays no part there)."""

from __future__ import annotations

import pytest

from jupyter_gpu.tutorials.cudnn_bench import (
    CudnnComparison,
    ProcessTimes,
    compare_in_processes,
    in_fresh_process,
)


def times(benchmark: bool, first: float, steady: float, new: float) -> ProcessTimes:
    return ProcessTimes(benchmark, first, steady, new)


def test_the_ratio_pairs_each_rounds_processes() -> None:
    off = tuple(times(False, 0.5, 0.010, 0.020) for _ in range(6))
    on = tuple(times(True, 1.5, 0.008 + i * 1e-4, 0.060) for i in range(6))
    comparison = CudnnComparison(off, on)
    first = comparison.ratio("first_call_s")
    assert first.slower
    assert first.value == pytest.approx(1 / 3)
    assert comparison.ratio("steady_s").faster
    assert comparison.ratio("new_shape_s").slower
    assert comparison.ratio("steady_s").rounds == 6
    assert comparison.median_s("first_call_s", True) == pytest.approx(1.5)
    with pytest.raises(KeyError, match="one of"):
        comparison.ratio("peak_s")


def test_a_process_that_fails_says_why() -> None:
    with pytest.raises(RuntimeError, match="the fresh process failed"):
        in_fresh_process(True, {"device": "no-such-device", "batch": 1, "size": 8})


@pytest.mark.slow
def test_a_round_of_processes_runs_on_the_cpu() -> None:
    settings = {
        "batch": 2,
        "size": 16,
        "new_shapes": 2,
        "steps": 2,
        "dtype": "fp32",
        "device": "cpu",
    }
    comparison = compare_in_processes(1, settings)
    assert [t.benchmark for t in comparison.off] == [False]
    assert [t.benchmark for t in comparison.on] == [True]
    assert all(t.first_call_s > 0 and t.steady_s > 0 and t.new_shape_s > 0 for t in comparison.off)
    with pytest.raises(ValueError, match="at least one round"):
        compare_in_processes(0, settings)


def test_the_fresh_processes_show_a_bar_in_a_notebook_and_close_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Twelve fresh processes took two minutes on the H200: a bar says how far the cell is.
    pytest.importorskip("ipywidgets")
    from types import SimpleNamespace

    from jupyter_gpu.magics.output import progress_bar
    from jupyter_gpu.tutorials import cudnn_bench

    shown: list[tuple[int, int, str]] = []
    bars: list[progress_bar.ProgressBar] = []

    class Recording(progress_bar.ProgressBar):
        def __init__(self, shell: object, total: int) -> None:
            super().__init__(shell, total)
            bars.append(self)

        def show(self, done: int, total: int, label_html: str) -> None:
            shown.append((done, total, label_html))
            super().show(done, total, label_html)

    monkeypatch.setattr(cudnn_bench, "ProgressBar", Recording)
    monkeypatch.setattr(cudnn_bench, "_shell", lambda: SimpleNamespace(kernel=object()))
    monkeypatch.setattr(
        cudnn_bench, "in_fresh_process", lambda flag, settings: ProcessTimes(flag, 0.2, 0.01, 0.05)
    )
    comparison = cudnn_bench.compare_in_processes(2, {})
    assert len(comparison.off) == len(comparison.on) == 2
    assert [(d, t) for d, t, _ in shown] == [(0, 4), (1, 4), (2, 4), (3, 4)]
    assert "fresh process 1 of 4 (benchmark off)" in shown[0][2]
    assert "fresh process 2 of 4 (benchmark on)" in shown[1][2]
    assert "fresh process 3 of 4 (benchmark on)" in shown[2][2]  # the order alternates
    (bar,) = bars
    assert not bar.shown  # closed once the processes are done: the result follows
