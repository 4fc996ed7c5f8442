"""benchmarks/gpt_step.py: ``fresh`` draws a new batch every step (as the notebooks' train_step
does), ``fixed`` times one batch over and over; both say which they did."""

import argparse
from types import ModuleType

import pytest

from tests.helpers import ROOT, load_script


@pytest.fixture(scope="module")
def gpt_step() -> ModuleType:
    return load_script(ROOT / "benchmarks" / "gpt_step.py")


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
    args = argparse.Namespace(device="cpu", runs=2, warmup=1, mode="default")
    tokens = torch.randint(0, 256, (4096,), dtype=torch.uint8)
    row = gpt_step.measure_gpt(gpt_step.SIZES["tiny"], "fp32", args, tokens, batches)

    assert row["batches"] == batches
    # one draw before the first step; "fresh" draws again in each of the first call, the warm-up,
    # the timed runs and the final loss step
    assert len(draws) == (1 if batches == "fixed" else 1 + 1 + 1 + 2 + 1)
    assert row["runs"] == 2
    assert row["step_ms"] > 0
    # a step on the CPU has no GPU clock columns (empty, not made up), whether or not a GPU is
    # there: that GPU's clocks say nothing about this run
    assert row["sm_clock_mhz_min"] is None
    assert row["power_w_mean"] is None


def test_a_step_on_the_gpu_has_its_clock_columns(gpt_step: ModuleType) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA (the GPU's clocks are read only for a step on it)")
    args = argparse.Namespace(device="cuda", runs=2, warmup=1, mode="default")
    tokens = torch.randint(0, 256, (4096,), dtype=torch.uint8, device="cuda")
    row = gpt_step.measure_gpt(gpt_step.SIZES["tiny"], "fp32", args, tokens, "fixed")
    assert row["sm_clock_mhz_min"] is not None
    assert 0 < row["sm_clock_mhz_min"] <= row["sm_clock_mhz_max"]
    assert row["power_w_mean"] > 0
