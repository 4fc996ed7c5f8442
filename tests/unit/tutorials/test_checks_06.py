"""Notebook 06's exercise: the recompile check counts dynamo's graphs over a training loop."""

from __future__ import annotations

import pytest
import torch

from jupyter_gpu.tutorials.checks_06 import STEPS, WarmupScale, check_recompile_fix
from tests.tutorial_solutions import WarmupScaleTensor

WIDTH = 16


class NoWarmup(WarmupScale):
    """A 'fix' that drops the warm-up: one graph, wrong outputs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.lin(x)
        return out


@pytest.fixture
def x() -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(4, WIDTH)


@pytest.mark.slow
def test_the_unchanged_model_and_dynamic_true_are_rejected(x: torch.Tensor) -> None:
    model = WarmupScale(WIDTH)
    starter = check_recompile_fix(model, torch.compile(model, backend="aot_eager"), x)
    assert not starter
    assert "recompile limit" in starter.message
    model = WarmupScale(WIDTH)
    dynamic = check_recompile_fix(model, torch.compile(model, backend="aot_eager", dynamic=True), x)
    assert not dynamic  # a value guard, not a shape: dynamic=True does not remove it
    assert f"for {STEPS} steps" in dynamic.message


def test_not_compiled_or_different_outputs_are_rejected(x: torch.Tensor) -> None:
    model = WarmupScale(WIDTH)
    assert "nothing was compiled" in check_recompile_fix(model, model, x).message
    wrong = NoWarmup(WIDTH)
    feedback = check_recompile_fix(wrong, torch.compile(wrong, backend="aot_eager"), x)
    assert not feedback
    assert "outputs changed" in feedback.message
    other = WarmupScaleTensor(WIDTH)  # compiled, but not the model whose step the loop advances
    assert not check_recompile_fix(
        WarmupScaleTensor(WIDTH), torch.compile(other, backend="aot_eager"), x
    )


def test_a_tensor_step_or_an_unspecialised_int_is_accepted(x: torch.Tensor) -> None:
    model = WarmupScaleTensor(WIDTH)
    feedback = check_recompile_fix(model, torch.compile(model, backend="aot_eager"), x)
    assert feedback
    assert feedback.message.startswith("1 graph(s)")
    with torch._dynamo.config.patch(allow_unspec_int_on_nn_module=True):
        model = WarmupScale(WIDTH)
        once = check_recompile_fix(model, torch.compile(model, backend="aot_eager"), x)
    assert once
    assert "one recompile left" in once.message
