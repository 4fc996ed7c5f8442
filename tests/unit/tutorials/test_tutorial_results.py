"""The results recorder, benchmarks/update_results.py that reads it, charts and feedback."""

import json
import math
import re
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from jupyter_gpu.measure import Ratio
from jupyter_gpu.tutorials.exercises import check, check_close
from jupyter_gpu.tutorials.images import image_grid, png_bytes
from jupyter_gpu.tutorials.plots import PLOTLY_MIMETYPE, bar_chart, line_chart
from jupyter_gpu.tutorials.results import Results, format_value
from jupyter_gpu.tutorials.sizing import Machine
from jupyter_gpu.tutorials.timing import format_seconds, time_back_to_back, time_calls

ROOT = Path(__file__).resolve().parents[3]


def update_results(results: Path, md: Path, *more: str) -> subprocess.CompletedProcess[str]:
    """``benchmarks/update_results.py`` on the run folder ``results``, writing into ``md``."""
    script = ROOT / "benchmarks" / "update_results.py"
    command = [sys.executable, str(script), str(results), "--results-md", str(md), *more]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def machine(mode: str = "gpu", gpu: str | None = "NVIDIA H200") -> Machine:
    return Machine(
        mode=mode,
        device="cuda" if gpu else "cpu",
        gpu_name=gpu,
        gpu_memory_bytes=150_000_000_000 if gpu else None,
        gpu_count=1 if gpu else 0,
        torch_version="2.11.0",
        cuda_version="13.0" if gpu else None,
        python_version="3.12.3",
        cpu_count=16,
    )


def test_format_value() -> None:
    assert format_value(1.2345, "x") == "1.23x"
    assert format_value(412345.6, "tokens/s") == "412,346 tokens/s"
    assert format_value(72.4, "%") == "72%"
    assert format_value(float("nan"), "s") == "n/a"
    assert format_value(48, "") == "48"  # a count keeps no decimals
    # Rates as the notebooks print them (00's tiny kernels: not 0.0001414), and three digits for
    # a unit without its own format (00's launch time: not 7.242 µs).
    assert format_value(707.91, "TFLOP/s") == "707.9 TFLOP/s"
    assert format_value(0.0001414, "TFLOP/s") == "0.000141 TFLOP/s"
    assert format_value(7.242, "µs") == "7.24 µs"
    assert format_value(3010.4, "GB/s") == "3,010 GB/s"


def test_checks_apply_only_to_full_size_runs_on_the_named_gpu() -> None:
    on_h200 = Results("nb", machine())
    assert on_h200.check("a", "speedup", 1.3, 1.25).met is True
    assert on_h200.check("b", "speedup", 1.1, 1.25).met is False
    smoke = Results("nb", machine("smoke", None))
    verdict = smoke.check("a", "speedup", 9.0, 1.25)
    assert verdict.met is None
    assert "n/a" in verdict.verdict()


def test_a_ratio_meets_its_target_only_where_its_interval_does() -> None:
    # 04's run of 2026-12-05 on the H200: a median of 0.84x against a target of 0.8, its
    # interval 0.632-1.1x; the claim beside it said "not in this run", the target said "met".
    results = Results("04-profiling", machine())
    wide = Ratio(0.84, 0.632, 1.1, 8, 0.99)
    check_wide = results.check("alone", "augmentation on the GPU, of the model alone", wide, 0.8)
    assert check_wide.met is False
    assert check_wide.verdict() == "NOT met: its interval reaches below the target"
    assert check_wide.measured() == "0.84x (0.63-1.10x)"
    shown = results.check("workers", "workers over slow", Ratio(5.09, 4.05, 7.43, 8, 0.99), 2.0)
    assert shown.met is True
    assert (shown.low, shown.high) == (4.05, 7.43)
    assert "0.84x (0.63-1.10x) >= 0.80x: NOT met: its interval" in str(results)
    plain = results.check("plain", "a figure without rounds", 0.84, 0.8)
    assert plain.met is True  # a lone figure is judged on itself, as before
    assert plain.measured() == "0.84x"
    # A rate and its interval keep their zeros: 680.0 (638.0-702.3), not 680 (638-702.3); its
    # target, alone, reads 650
    rate = results.check("rate", "GEMMs", Ratio(680.0, 638.0, 702.3, 8, 0.99), 650, "TFLOP/s")
    assert rate.measured() == "680.0 TFLOP/s (638.0-702.3 TFLOP/s)"
    assert "680.0 TFLOP/s (638.0-702.3 TFLOP/s) >= 650.0 TFLOP/s" in str(results)


def test_add_rejects_duplicates_and_non_numbers() -> None:
    results = Results("nb", machine())
    assert results.add("k", "label", 2, "x") == 2.0
    assert results["k"] == 2.0
    with pytest.raises(ValueError, match="recorded already"):
        results.add("k", "label", 3, "x")
    with pytest.raises(ValueError, match="finite"):
        results.add("nan", "label", math.nan, "x")


def test_save_and_update_results_md(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = Results("01-torch-compile", machine())
    results.add("tok", "compile + bf16", 512_000, "tokens/s", "median of 10 runs")
    results.check("speedup", "compile / eager bf16", 1.31, 1.25)
    results.check("ratio", "compile / eager fp32", Ratio(2.6, 2.4, 2.8, 12, 0.95), 2.5)
    assert results.save() is None  # no directory given, none in the environment
    monkeypatch.setenv("JUPYTER_GPU_RESULTS_DIR", str(tmp_path / "res"))
    path = results.save()
    assert path == tmp_path / "res" / "01-torch-compile.json"
    data = json.loads(path.read_text())
    assert data["machine"]["gpu_name"] == "NVIDIA H200"
    assert data["checks"][0]["met"] is True
    assert "512,000 tokens/s" in str(results)
    assert "<table>" in results._repr_html_()

    md = tmp_path / "RESULTS.md"
    md.write_text(
        "# Measured results\n\n## Tutorials on one H200 (x)\n\n(pending)\n\n## Later\n\nkeep\n"
    )
    run = update_results(tmp_path / "res", md)
    assert run.returncode == 0, run.stderr
    text = md.read_text()
    assert "(pending)" not in text
    assert "| compile + bf16 | 512,000 tokens/s | median of 10 runs |" in text
    assert "| 01-torch-compile | compile / eager bf16 >= 1.25x | 1.31x | yes |" in text
    # its median clears 2.5, its interval does not: not met
    assert "| compile / eager fp32 >= 2.50x | 2.60x (2.40-2.80x) | **no** |" in text
    assert text.endswith("## Later\n\nkeep\n")
    assert "NVIDIA H200 (140 GiB), torch 2.11.0, CUDA 13.0" in text


def test_update_results_names_an_emulated_tier(tmp_path: Path) -> None:
    Results("02-mixed-precision", machine()).save(tmp_path / "res")
    md = tmp_path / "RESULTS.md"
    md.write_text("# Measured results\n\n## Tutorials on one H200 (x)\n\nfull\n")
    for tier in ("16gb", "24gb"):
        run = update_results(tmp_path / "res", md, "--tier", tier)
        assert run.returncode == 0, run.stderr
    text = md.read_text()
    assert "## Tutorials on one H200 (x)\n\nfull\n" in text  # the full-size section untouched
    sixteen = text[
        text.index("## Tutorials at the 16gb tier") : text.index("## Tutorials at the 24gb")
    ]
    assert "at the 16gb tier" in sixteen
    assert "fp16 + GradScaler" in sixteen
    twenty_four = text[text.index("## Tutorials at the 24gb tier") :]
    assert "at the 24gb tier" in twenty_four
    assert "fp16" not in twenty_four
    assert "at full size" not in text
    assert "h200-notebooks/" not in text


def test_update_results_refuses_smoke_runs(tmp_path: Path) -> None:
    Results("00-start-here", machine("smoke", None)).save(tmp_path)
    md = tmp_path / "RESULTS.md"
    run = update_results(tmp_path, md)
    assert run.returncode == 2
    assert "did not run at full size" in run.stderr
    assert not md.exists()


def test_charts_carry_plotly_and_svg() -> None:
    chart = line_chart({"fp32": [3.0, 2.0, 1.5], "bf16": [3.0, 2.1]}, title="loss")
    bundle = chart._repr_mimebundle_()
    assert bundle[PLOTLY_MIMETYPE]["data"][1]["y"] == [3.0, 2.1]
    assert bundle["text/html"].startswith("<svg")
    assert "bf16 2.1" in bundle["text/plain"]
    bars = bar_chart({"slow": 1000.0, "fixed": 4000.0}, title="images/s", unit="images/s")
    assert "fixed" in bars._repr_mimebundle_()["text/html"]
    with pytest.raises(ValueError, match="non-empty"):
        line_chart({}, title="x")


def test_png_is_valid_grayscale() -> None:
    grid = image_grid([np.zeros((4, 4)), np.ones((4, 4))], columns=2, gap=1)
    assert grid.shape == (4, 9)
    data = png_bytes(grid)
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    idat = data.index(b"IDAT")
    length = int.from_bytes(data[idat - 4 : idat], "big")
    raw = zlib.decompress(data[idat + 4 : idat + 4 + length])
    assert len(raw) == 4 * (1 + 9)  # 4 rows, each a filter byte and 9 pixels
    assert raw[1] == 0
    assert raw[9] == 255


def test_feedback() -> None:
    assert check(True, "good", "try again").message == "good"
    assert not check(False, "good", "try again")
    close = check_close(1.005, 1.0, rel=0.01, what="ratio")
    assert close
    assert "✓" in str(close)
    assert not check_close(2.0, 1.0, rel=0.01, what="ratio", hint="divide")


def test_timing() -> None:
    calls = []
    timing = time_calls(lambda: calls.append(1), runs=5, warmup=2, device="cpu")
    assert len(calls) == 7
    assert timing.runs == 5
    assert timing.rate(10) > 0
    assert "median of 5 runs after 2 warm-up" in timing.describe()
    assert format_seconds(2e-5) == "20.0 µs"
    assert format_seconds(0.0123) == "12.3 ms"
    with pytest.raises(ValueError, match="runs"):
        time_calls(lambda: None, runs=0, warmup=0, device="cpu")


def test_time_back_to_back_synchronises_per_run_not_per_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import jupyter_gpu.measure.timing as measure

    syncs: list[object] = []
    monkeypatch.setattr(measure, "synchronize", syncs.append)
    calls = []

    def step() -> None:
        calls.append(1)
        time.sleep(0.002)

    timing = time_back_to_back(step, calls=4, runs=3, warmup=1, device="cuda")
    assert len(calls) == 1 + 4 * 3
    assert len(syncs) == 2 * 1 + 2 * 3  # around the warm-up call, then around each run
    assert timing.runs == 3
    assert timing.calls_per_run == 4
    assert min(timing.times_s) >= 0.002
    assert timing.min_s < 0.008  # per call: a whole run of 4 calls takes 8 ms or more
    assert "median of 3 runs of 4 calls back to back, after 1 warm-up" in timing.describe()
    with pytest.raises(ValueError, match="calls"):
        time_back_to_back(step, calls=0, runs=1, device="cpu")


def test_update_results_adds_benchmark_tables(tmp_path: Path) -> None:
    Results("04-profiling", machine()).save(tmp_path)
    gpt = {
        "gpu": "NVIDIA H200",
        "torch": "2.11.0",
        "date": "2026-11-30",
        "gpt": [
            {
                "size": "notebook",
                "config": "bf16",
                "step_ms": 40.0,
                "tokens_per_s": 409600.0,
                "tflops": 433.8,
                "peak_gib": 9.5,
                "runs": 10,
                "step_ms_interval": [39.1, 41.2],
            },
            {"size": "notebook", "config": "bf16-cudnn", "error": "RuntimeError: no kernel"},
        ],
        "mlp": [{"config": "reduce-overhead", "depth": 24, "step_ms": 1.1, "runs": 50}],
        "checks": [
            # Judged on its interval: the median is above the target, its low end below.
            {
                "size": "notebook",
                "figure": "compile+bf16 TFLOP/s",
                "value": 460.0,
                "interval": [441.0, 470.0],
                "target": 450.0,
                "met": False,
            },
            # A file from before the intervals: shown as it is, not judged.
            {"size": "notebook", "figure": "bf16 / eager fp32", "value": 7.5, "target": 2.5},
        ],
    }
    pipe = {
        "gpu": "NVIDIA H200",
        "torch": "2.11.0",
        "date": "2026-11-30",
        "cpus": 16,
        "fixed_over_slow": 5.0,
        "fixed_over_slow_interval": [4.1, 6.0],
        "rounds": 12,
        "target": 2.0,
        "rows": [{"pipeline": "slow", "workers": 0, "pin_memory": False, "images_per_s": 5000.0}],
    }
    (tmp_path / "gpt_step.json").write_text(json.dumps(gpt))
    (tmp_path / "input_pipeline.json").write_text(json.dumps(pipe))
    md = tmp_path / "RESULTS.md"
    run = update_results(tmp_path, md)
    assert run.returncode == 0, run.stderr
    text = md.read_text()
    assert "| notebook | bf16 | 40.0 | 39.1-41.2 | 409,600 | 433.8 | 9.5 | 10 |" in text
    assert "| notebook | compile+bf16 TFLOP/s | 460.00 | 441.00-470.00 | 450.0 | **no** |" in text
    old = "| notebook | bf16 / eager fp32 | 7.50 | none (medians only) | 2.5 | not judged |"
    assert old in text
    assert "failed: RuntimeError: no kernel" in text
    assert "| reduce-overhead | 24 | 1.100 | 50 |" in text
    assert "fixed / slow = 5.00x (4.10-6.00x, 12 rounds)" in text
    assert "| slow | 0 | False | 5,000 |" in text


def test_a_claim_prints_what_was_measured_and_says_when_it_does_not_hold(
    tmp_path: Path,
) -> None:
    from jupyter_gpu.measure import paired_ratio
    from jupyter_gpu.tutorials import claims

    results = Results("02-mixed-precision", machine())
    ratio = paired_ratio([2.0] * 8, [1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.0])
    held = results.claim(
        "bf16", "bf16 is faster than fp32 here", holds=claims.faster(ratio), measured="x"
    )
    assert held.holds
    assert held.judged  # a full-size run on a GPU
    assert held.line().startswith("✓ bf16 is faster than fp32 here")
    same = paired_ratio([1.0] * 8, [1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.0])
    failed = results.claim(
        "tf32",
        "TF32 makes this step faster",
        holds=claims.faster(same),
        measured=same.describe(),
    )
    assert not failed.holds
    assert failed.line().startswith("✗ Not in this run: TF32 makes this step faster. Measured:")
    assert "no measurable difference" in failed.line()
    assert "claims: 1 of 2 held" in str(results)
    with pytest.raises(ValueError, match="recorded already"):
        results.claim("tf32", "again", holds=True, measured="")
    smoke = Results("02-mixed-precision", machine("smoke", None))
    assert not smoke.claim("a", "s", holds=True, measured="m").judged

    results.save(tmp_path / "res")
    md = tmp_path / "RESULTS.md"
    md.write_text("# Measured results\n\n## Tutorials on one H200 (x)\n\n(pending)\n")
    run = update_results(tmp_path / "res", md)
    assert run.returncode == 0, run.stderr
    text = md.read_text()
    assert "### Claims" in text
    assert "| 02-mixed-precision | 1 of 2 | TF32 makes this step faster (measured: " in text


def run_benchmark(script: str, *args: str, out: Path) -> subprocess.CompletedProcess[str]:
    """Run ``benchmarks/<script>`` on the CPU in 3 rounds, its JSON to ``out``; it must succeed."""
    script_path = str(ROOT / "benchmarks" / script)
    command = [sys.executable, script_path, *args, "--rounds", "3", "--json", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done


def test_the_input_pipeline_benchmark_times_its_pipelines_in_rounds_with_an_interval(
    tmp_path: Path,
) -> None:
    # It compared medians of windows timed one pipeline after another, with no interval.
    out = tmp_path / "input_pipeline.json"
    args = ["--device", "cpu", "--size", "16", "--width", "4", "--batch", "16", "--workers", "1"]
    done = run_benchmark("input_pipeline.py", *args, "--batches", "1", "--waves", "1", out=out)
    figures = json.loads(out.read_text())
    low, high = figures["fixed_over_slow_interval"]
    assert low <= figures["fixed_over_slow"] <= high
    assert figures["rounds"] == 3
    assert figures["met"] == (low >= figures["target"])
    assert [r["pipeline"] for r in figures["rows"]] == ["slow", "workers", "fixed", "gpu-only"]
    assert "3 rounds, each timing every variant once" in done.stdout


def test_the_gpu_augmentation_benchmark_splits_the_pipeline_and_keeps_each_round(
    tmp_path: Path,
) -> None:
    # Its per-round times are what showed a stall that comes and goes (2026-12-05, one H100).
    out = tmp_path / "gpu_augmentation.json"
    args = ["--device", "cpu", "--size", "16", "--width", "4", "--batch", "16", "--steps", "1"]
    done = run_benchmark(
        "gpu_augmentation.py", *args, "--threads", "1", "--profiled-first", out=out
    )
    figures = json.loads(out.read_text())
    assert figures["intra_op_threads"] == 1
    assert figures["compile_pool"] is False
    assert figures["profiled_first"] is True
    assert "profiled first (TEARDOWN_CUPTI=" in done.stdout
    assert re.search(
        r"profiled 5 steps of the notebook's pipeline first: [1-9][\d,]* events", done.stdout
    )
    rows = figures["rows"]
    assert len(rows) == 5
    assert rows[0]["against_alone"] is None  # the baseline
    assert all(r["against_alone"] and "3 rounds" in r["against_alone"] for r in rows[1:])
    assert all(len(r["rounds_step_ms"]) == 3 for r in rows)
    assert "compiles in this process" in done.stdout
