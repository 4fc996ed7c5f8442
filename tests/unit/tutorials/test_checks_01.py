"""Notebook 01's exercise check (8.1) accepts every correct answer and rejects the wrong ones.

Real compiles with ``aot_eager``, as the notebook runs in smoke mode. A correct answer compiles
with ``fullgraph=True``, matches the original on both sides of the 1e-3 threshold, and has finite
gradients where the original does (everywhere). The wrong answers: the graph break itself, an
answer that always divides, one that divides by a clamped standard deviation (the old hint's
"or clamp"), and the plain ``torch.where``, whose gradient is NaN on a constant input.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import torch
from torch import nn

from jupyter_gpu.tutorials.checks_01 import check_standardize
from tests.tutorial_solutions import Standardize, StandardizePlainWhere, StandardizeSafeWhere

# ------------------------------------------------------------------ wrong answers


class AlwaysDivides(nn.Module):
    """No graph break, the same result on random data, and wrong where the original skips."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - x.mean()) / x.std()


class ClampedStd(nn.Module):
    """The old hint's "or clamp": divides by 1e-3 where the original does not divide at all."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - x.mean()) / x.std().clamp(min=1e-3)


class DetachedPlainWhere(nn.Module):
    """Detaching the std does not help: the unused branch's centred / 0 still meets a zero."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        std = x.std().detach()
        centred = x - x.mean()
        return torch.where(std > 1e-3, centred / std, centred)


class NoGradient(nn.Module):
    """Right results, but detached: nothing trains through it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.detach()
        std = x.std()
        centred = x - x.mean()
        return torch.where(std > 1e-3, centred / torch.where(std > 1e-3, std, 1.0), centred)


# ------------------------------------------------------------------ correct answers


class DetachedSafeWhere(nn.Module):
    """As the original's float(): the std out of the gradient, and a safe divisor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        std = x.std().detach()
        centred = x - x.mean()
        return centred / torch.where(std > 1e-3, std, torch.ones_like(std))


class MaskArithmetic(nn.Module):
    """No torch.where at all: a 0/1 mask chooses the divisor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        std = x.std()
        divides = (std > 1e-3).to(x.dtype)
        return (x - x.mean()) / (divides * std + (1 - divides))


class FromVariance(nn.Module):
    """The threshold on the variance (1e-6), the square root only of a safe value."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var = x.var()
        divides = var > 1e-6
        centred = x - x.mean()
        return torch.where(divides, centred / torch.where(divides, var, 1.0).sqrt(), centred)


@pytest.fixture(autouse=True)
def quiet_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    torch._logging.set_logs(dynamo=logging.ERROR)
    yield
    # Back to torch's defaults: left at ERROR, dynamo's warnings never reached the magics'
    # notes in later tests of the same process (tests/integration/magics/test_quiet.py).
    torch._logging.set_logs()


def _check(answer: type[nn.Module]) -> object:
    return check_standardize(answer, Standardize, backend="aot_eager", device="cpu")


def test_rejects_the_graph_break() -> None:
    feedback = _check(Standardize)
    assert not feedback
    assert "fullgraph=True refused it" in feedback.message


@pytest.mark.parametrize("answer", [AlwaysDivides, ClampedStd], ids=lambda a: a.__name__)
def test_rejects_an_answer_that_divides_where_the_original_does_not(
    answer: type[nn.Module],
) -> None:
    feedback = _check(answer)
    assert not feedback
    assert "nearly constant input" in feedback.message
    assert "torch.where" in feedback.message


@pytest.mark.parametrize(
    "answer", [StandardizePlainWhere, DetachedPlainWhere], ids=lambda a: a.__name__
)
def test_rejects_a_nan_gradient_on_the_constant_input(answer: type[nn.Module]) -> None:
    feedback = _check(answer)
    assert not feedback
    assert "constant input (std 0)" in feedback.message
    assert "gradient is not finite" in feedback.message
    assert "made safe" in feedback.message


def test_rejects_an_answer_without_a_gradient() -> None:
    feedback = _check(NoGradient)
    assert not feedback
    assert "no gradient" in feedback.message


@pytest.mark.parametrize(
    "answer",
    [StandardizeSafeWhere, DetachedSafeWhere, MaskArithmetic, FromVariance],
    ids=lambda a: a.__name__,
)
def test_accepts_every_correct_answer(answer: type[nn.Module]) -> None:
    feedback = _check(answer)
    assert feedback, feedback.message
