"""Notebook 01's exercise check (8.1) rejects the known wrong answers and accepts the solution.

Real compiles with ``aot_eager``, as the notebook runs in smoke mode.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import torch
from torch import nn

from jupyter_gpu.tutorials.checks_01 import check_standardize


class Standardize(nn.Module):
    """Notebook 01's original: a Python float decides, so Dynamo breaks the graph."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        std = float(x.std())
        if std > 1e-3:
            return (x - x.mean()) / std
        return x - x.mean()


class AlwaysDivides(nn.Module):
    """No graph break, the same result on random data, and wrong where the original skips."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - x.mean()) / x.std()


class StandardizeMine(nn.Module):
    """The notebook's solution."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        std = x.std()
        centred = x - x.mean()
        return torch.where(std > 1e-3, centred / std, centred)


@pytest.fixture
def quiet_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    torch._logging.set_logs(dynamo=logging.ERROR)
    yield
    # Back to torch's defaults: left at ERROR, dynamo's warnings never reached the magics'
    # notes in later tests of the same process (tests/integration/magics/test_quiet.py).
    torch._logging.set_logs()


@pytest.mark.usefixtures("quiet_dynamo")
def test_standardize_rejects_an_answer_that_always_divides() -> None:
    feedback = check_standardize(AlwaysDivides, Standardize, backend="aot_eager", device="cpu")
    assert not feedback
    assert "nearly constant input" in feedback.message


@pytest.mark.usefixtures("quiet_dynamo")
def test_standardize_rejects_the_graph_break_and_accepts_the_solution() -> None:
    broken = check_standardize(Standardize, Standardize, backend="aot_eager", device="cpu")
    assert not broken
    assert "fullgraph=True refused it" in broken.message
    assert check_standardize(StandardizeMine, Standardize, backend="aot_eager", device="cpu")
