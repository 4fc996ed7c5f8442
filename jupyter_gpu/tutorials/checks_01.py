"""Notebook 01's exercise 8.1: standardize a tensor without a graph break, checked.

The notebook's ``Standardize`` divides by the standard deviation only when it is above 1e-3, and
decides with a Python float: a graph break. A rewrite must compile with ``fullgraph=True`` (which
raises on any graph break) and give the original's results, also where the original does *not*
divide: an answer that always divides passes on random data and fails on a constant input.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .exercises import Feedback, check


def probe_inputs(device: str) -> dict[str, torch.Tensor]:
    """Inputs on both sides of the 1e-3 threshold: spread out, nearly constant, constant."""
    generator = torch.Generator().manual_seed(0)
    spread = torch.randn(8, 32, generator=generator) * 3
    nearly = 2.0 + 1e-5 * torch.randn(8, 32, generator=generator)  # std about 1e-5
    return {
        "random data (std about 3)": spread.to(device),
        "a nearly constant input (std about 1e-5)": nearly.to(device),
        "a constant input (std 0)": torch.full((8, 32), 2.0).to(device),
    }


def check_standardize(
    mine: type[torch.nn.Module] | None,
    original: type[torch.nn.Module],
    *,
    backend: str | Callable[..., object],
    device: str,
) -> Feedback:
    """Compile ``mine`` with ``fullgraph=True`` and compare it with ``original`` (eager)."""
    if mine is None:
        return check(False, "", "define StandardizeMine first")
    compiled = torch.compile(mine(), backend=backend, fullgraph=True)
    reference = original()
    for what, data in probe_inputs(device).items():
        try:
            ours = compiled(data)
        except torch._dynamo.exc.TorchDynamoException as error:  # the graph break, its reason
            return check(False, "", f"fullgraph=True refused it: {str(error).splitlines()[0]}")
        expected = reference(data)
        if not torch.allclose(ours, expected, rtol=1e-4, atol=1e-5, equal_nan=False):
            worst = (ours - expected).abs().nan_to_num(float("inf")).max().item()
            return check(
                False,
                "",
                f"on {what} it differs from the original (largest difference {worst:.3g}): "
                "the original divides only when the standard deviation is above 1e-3",
            )
    return check(
        True,
        "no graph break, and the original's result on both sides of the 1e-3 threshold",
        "",
    )
