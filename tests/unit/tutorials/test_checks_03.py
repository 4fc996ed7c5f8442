"""Notebook 03's exercise check (4.1): a step under a measured memory cap, with activation
checkpointing written by the student, on a real GPT (CPU)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from jupyter_gpu.tutorials.checks_03 import CapExercise, check_step, prepare
from jupyter_gpu.tutorials.gpt import GPT, GPTConfig
from tests.tutorial_answers_02_03 import (
    batch_loss,
    first_block_only,
    flag_only,
    micro_batches,
    my_step_solution,
)

# A real GPT and its measured cap (exercise), built once on one pytest-xdist worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("checks_03")]


@pytest.fixture(scope="module")
def exercise() -> CapExercise:
    torch.manual_seed(0)
    model = GPT(GPTConfig(context=64, n_layer=2, n_head=2, d_model=64))
    x = torch.randint(0, 256, (8, 64))
    y = torch.randint(0, 256, (8, 64))
    return prepare(model, x, y, batch_loss, "cpu")


def unchanged(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    loss = batch_loss(model, x, y)
    loss.backward()
    return loss


def not_divided(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    losses = []
    for xs, ys in zip(x.chunk(4), y.chunk(4), strict=True):
        loss = batch_loss(model, xs, ys)
        loss.backward()  # each micro-batch's full gradient: four times too large in sum
        losses.append(loss.detach())
    return torch.stack(losses).mean()


def half_the_batch(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    loss = batch_loss(model, x[: len(x) // 2], y[: len(y) // 2])
    loss.backward()
    return loss


def test_the_budget_is_between_half_and_full(exercise: CapExercise) -> None:
    assert exercise.half_peak_bytes < exercise.budget_bytes < exercise.full_peak_bytes
    assert "profile_memory" in exercise.source  # measured on the CPU


def test_memory_cap_accepts_the_solution(exercise: CapExercise) -> None:
    feedback = check_step(my_step_solution, exercise)
    assert feedback, feedback.message
    assert all(p.grad is None for p in exercise.model.parameters())


@pytest.mark.parametrize(
    ("wrong", "said"),
    [
        (unchanged, "the budget is"),
        (not_divided, "times the full batch's"),
        (half_the_batch, "point elsewhere"),
        (None, "define my_step"),
        (flag_only, "model.checkpointing = True"),
        (micro_batches, "micro-batches do that"),
        (first_block_only, "block 1 of 2 ran once"),
    ],
)
def test_memory_cap_rejects_wrong_steps(exercise: CapExercise, wrong: object, said: str) -> None:
    feedback = check_step(wrong, exercise)  # type: ignore[arg-type]
    assert not feedback
    assert said in feedback.message


def test_memory_cap_puts_the_models_flag_back(exercise: CapExercise) -> None:
    model = exercise.model
    assert not check_step(flag_only, exercise)
    assert model.checkpointing is False
    model.checkpointing = True  # a flag the notebook left on stays on after the check
    try:
        assert check_step(my_step_solution, exercise)
        assert model.checkpointing is True
    finally:
        model.checkpointing = False


def test_memory_cap_reports_what_checkpointing_kept(exercise: CapExercise) -> None:
    feedback = check_step(my_step_solution, exercise)
    assert "every block recomputed" in feedback.message
    assert exercise.plain_saved_bytes > 0
    assert "of a plain forward's" in feedback.message
