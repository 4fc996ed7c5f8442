"""benchmarks/gpt_step.py: its configs timed by the one timing method, its targets judged on
their intervals; ``fresh`` draws a new batch every step (as the notebooks' train_step does),
``fixed`` times one batch over and over, and both say which they did."""

import argparse
import functools
from types import ModuleType

import pytest

from jupyter_gpu.measure import Comparison, Timing
from tests.helpers import ROOT, load_script


@pytest.fixture(scope="module")
def gpt_step() -> ModuleType:
    return load_script(ROOT / "benchmarks" / "gpt_step.py")


def _args(device: str, batches: str) -> argparse.Namespace:
    return argparse.Namespace(device=device, rounds=2, warmup=1, mode="default", batches=batches)


def _measure(gpt_step: ModuleType, args: argparse.Namespace, tokens, configs: list[str]):
    size = gpt_step.SIZES["tiny"]
    builds = {
        c: (
            {"size": "tiny", "config": c, "batches": args.batches},
            functools.partial(gpt_step.prepare_gpt, size, c, args, tokens, args.batches),
        )
        for c in configs
    }
    return gpt_step.measure_all(builds, args, warmup=args.warmup)


@pytest.mark.slow
@pytest.mark.parametrize("batches", ["fixed", "fresh"])
def test_batches_source(gpt_step: ModuleType, monkeypatch, batches: str) -> None:
    import torch

    draws = []
    real = gpt_step.random_batch

    def counting(*args, **kwargs):
        draws.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(gpt_step, "random_batch", counting)
    tokens = torch.randint(0, 256, (4096,), dtype=torch.uint8)
    (row,), comparison = _measure(gpt_step, _args("cpu", batches), tokens, ["fp32"])

    assert row["batches"] == batches
    assert comparison is not None
    assert row["runs"] == comparison.rounds == 2
    # One draw before the first step; "fresh" draws again in each call: the first (timed on its
    # own), the warm-up, every call of every round, and the step that reads the loss.
    calls = 1 + 1 + row["runs"] * row["calls_per_round"] + 1
    assert len(draws) == (1 if batches == "fixed" else 1 + calls)
    low, high = row["step_ms_interval"]
    assert low <= row["step_ms"] <= high
    assert row["tflops_interval"][0] <= row["tflops"] <= row["tflops_interval"][1]
    # a step on the CPU has no GPU clock columns (empty, not made up), whether or not a GPU is
    # there: that GPU's clocks say nothing about this run
    assert row["sm_clock_mhz_min"] is None
    assert row["power_w_mean"] is None
    assert row["peak_gib"] is None


def test_a_config_that_fails_to_build_is_a_row_saying_so_beside_the_others(
    gpt_step: ModuleType,
) -> None:
    args = _args("cpu", "fixed")

    def broken() -> None:
        raise RuntimeError("no kernel")

    builds = {"bad": ({"size": "tiny", "config": "bad", "batches": "fixed"}, broken)}
    rows, comparison = gpt_step.measure_all(builds, args, warmup=1)
    assert comparison is None
    assert rows == [
        {"size": "tiny", "config": "bad", "batches": "fixed", "error": "RuntimeError: no kernel"}
    ]


def _comparison(fp32_s: list[float], bf16_s: list[float]) -> Comparison:
    timings = {"fp32 fixed": Timing(tuple(fp32_s), 1), "bf16 fixed": Timing(tuple(bf16_s), 1)}
    return Comparison(timings, "fp32 fixed", len(fp32_s), "perf_counter")


def test_a_target_is_met_only_where_its_intervals_low_end_reaches_it(gpt_step: ModuleType) -> None:
    rows = [{"config": c, "batches": "fixed"} for c in ("fp32", "bf16")]
    steady = _comparison([3.0] * 12, [1.0] * 12)
    (check,) = gpt_step.gpt_checks("notebook", rows, steady, "fixed")
    assert check["figure"] == "bf16 / eager fp32"
    assert check["value"] == pytest.approx(3.0)
    assert check["met"]
    # The same median ratio (3x) with rounds that reach below 2.5x: not met.
    bf16 = [1.0] * 6 + [1.5, 1.4, 1.6, 1.3, 1.45, 1.35]
    fp32 = [3.0] * 6 + [3.0] * 6
    shaky = gpt_step.gpt_checks("notebook", rows, _comparison(fp32, bf16), "fixed")[0]
    assert shaky["value"] >= gpt_step.TARGET_BF16_OVER_FP32
    assert shaky["interval"][0] < gpt_step.TARGET_BF16_OVER_FP32
    assert not shaky["met"]
    # The compiled step's rate is judged on the low end of its own interval.
    compiled = {
        "config": "compile-bf16",
        "batches": "fixed",
        "tflops": 460.0,
        "tflops_interval": [440.0, 470.0],
    }
    rate = gpt_step.gpt_checks("notebook", [compiled], steady, "fixed")[0]
    assert rate["figure"] == "compile+bf16 TFLOP/s"
    assert not rate["met"]


def test_a_step_on_the_gpu_has_its_clock_columns(gpt_step: ModuleType) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA (the GPU's clocks are read only for a step on it)")
    tokens = torch.randint(0, 256, (4096,), dtype=torch.uint8, device="cuda")
    (row,), _ = _measure(gpt_step, _args("cuda", "fixed"), tokens, ["fp32"])
    assert row["sm_clock_mhz_min"] is not None
    assert 0 < row["sm_clock_mhz_min"] <= row["sm_clock_mhz_max"]
    assert row["power_w_mean"] > 0
    assert row["peak_gib"] > 0  # its own: above what was allocated before its model
