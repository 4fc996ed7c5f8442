"""Notebook 06's exercise 6.1: make a recompile go away.

:class:`WarmupScale` keeps its step count in a plain Python ``int`` attribute, as many training
loops do for a warm-up. torch.compile treats an ``nn.Module``'s integer attributes as constants
(dynamo guards ``self.step == N``), so every step compiles a new graph until the recompile
limit, after which dynamo gives up and runs the module eagerly; ``dynamic=True`` changes nothing,
since it is not a shape. :func:`check_recompile_fix` counts the graphs dynamo compiles while a
training loop advances the step.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .exercises import Feedback, check

#: Steps the check runs: more than dynamo's default recompile limit (8).
STEPS = 12


class WarmupScale(nn.Module):
    """A linear layer whose output is scaled up from 0 to 1 over the first ``warmup`` steps.

    The training loop advances ``step`` (``model.step += 1``) after each call.
    """

    def __init__(self, width: int, warmup: int = 10) -> None:
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.warmup = warmup
        self.step = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.lin(x) * min(1.0, self.step / self.warmup)
        return out


def recompile_limit() -> int:
    """Dynamo's recompile limit (``recompile_limit``; ``cache_size_limit`` in older torch)."""
    config = torch._dynamo.config
    return int(getattr(config, "recompile_limit", getattr(config, "cache_size_limit", 8)))


def graphs_over_steps(model: Any, compiled: Any, x: torch.Tensor, steps: int) -> tuple[int, bool]:
    """Graphs dynamo compiles while ``compiled(x)`` runs ``steps`` training steps of ``model``.

    After each call the loop advances ``model.step`` by one, as a training loop would. Also
    says whether every output equals the warm-up formula, computed eagerly from ``model.lin``
    and ``model.warmup``. Starts from a clean dynamo (``torch._dynamo.reset()``).
    """
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    before = counters["stats"]["unique_graphs"]
    right = True
    with torch.no_grad():
        for _ in range(steps):
            step = int(model.step)
            out = compiled(x)
            expected = model.lin(x) * min(1.0, step / model.warmup)
            right = right and torch.allclose(out, expected, rtol=1e-4, atol=1e-5)
            model.step += 1
    return counters["stats"]["unique_graphs"] - before, right


def check_recompile_fix(model: Any, compiled: Any, x: torch.Tensor) -> Feedback:
    """Exercise 6.1: at most one recompile over :data:`STEPS` steps, the same outputs, compiled.

    At most one, not none: where dynamo makes a changing value symbolic on its own (an
    ``int`` argument, ``allow_unspec_int_on_nn_module``) it compiles the first call for the value
    it saw and recompiles once.
    """
    for name in ("lin", "warmup", "step"):
        if not hasattr(model, name):
            return check(False, "", f"keep the model's {name!r}: the check reads it")
    graphs, right = graphs_over_steps(model, compiled, x, STEPS)
    if not right:
        return check(
            False,
            "",
            f"the outputs changed: keep what forward computes, lin(x) * min(1, step / warmup), "
            f"and compile the model whose step the loop advances ({graphs} graphs)",
        )
    if graphs == 0:
        return check(False, "", "nothing was compiled: my_compiled must be torch.compile(...)")
    if graphs > 2:
        limit = recompile_limit()
        more = (
            f" (dynamo stopped at its recompile limit, {limit}, and ran the rest eagerly)"
            if graphs >= limit
            else ""
        )
        return check(
            False,
            "",
            f"{graphs} graphs for {STEPS} steps{more}: read the guard that failed in the log "
            "above, and change what it guards",
        )
    return check(
        True,
        f"{graphs} graph(s) for {STEPS} steps, the same outputs"
        + (": one recompile left, where dynamo made the value symbolic" if graphs == 2 else ""),
        "",
    )
