"""benchmarks/gpt_step.py: ``fresh`` draws a new batch every step (as the notebooks' train_step
does), ``fixed`` times one batch over and over; both say which they did."""

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def gpt_step() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpt_step", ROOT / "benchmarks" / "gpt_step.py")
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpt_step"] = module
    spec.loader.exec_module(module)
    return module


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
    # without a GPU the clock columns are empty, not made up
    assert row["sm_clock_mhz_min"] is None
    assert row["power_w_mean"] is None
