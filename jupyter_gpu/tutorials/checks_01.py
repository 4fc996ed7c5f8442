"""Notebook 01's exercise 8.1: standardize a tensor without a graph break, checked.

The notebook's ``Standardize`` divides by the standard deviation only when it is above 1e-3, and
decides with a Python float: a graph break. A rewrite must

1. compile with ``fullgraph=True`` (which raises on any graph break);
2. give the original's results on random data, on a nearly constant input and on a constant one:
   also where the original does *not* divide. An answer that always divides, or divides by a
   clamped standard deviation (``std.clamp(min=1e-3)`` divides by 1e-3 where the original does
   not divide at all), passes on random data and fails on the nearly constant input;
3. give finite gradients wherever the original does, which is everywhere (its ``float()`` takes
   the standard deviation out of the gradient). The plain ``torch.where(std > 1e-3, centred /
   std, centred)`` fails here on the constant input: the branch it does not pick still gets a
   gradient, zero, and the division's backward turns it into ``0 / 0``, NaN (PyTorch's tutorial
   *Distinguishing between 0 and NaN gradient*, on pytorch#10729). Dividing by a standard
   deviation made safe where it is not used, ``torch.where(std > 1e-3, std, 1)``, passes.

The gradients themselves are not compared with the original's: its ``float()`` cuts the
standard deviation out of them, and a rewrite that keeps it in (the true derivative) trains as
well.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch

from .exercises import Feedback, check

NAN_GRADIENT = (
    "torch.where sends a gradient to both of its branches, zero to the one it did not pick, and "
    "the backward of centred / std divides that zero by std: on a constant input 0 / 0, NaN. "
    "Divide by a standard deviation made safe where it is not used, torch.where(std > 1e-3, std, "
    "torch.ones_like(std)), so that the branch not picked is finite too"
)


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


def _forward_and_grad(
    fn: Callable[[torch.Tensor], torch.Tensor], data: torch.Tensor, weight: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``fn(data)`` and the gradient of ``(fn(data) * weight).sum()`` with respect to ``data``."""
    x = data.clone().requires_grad_(True)
    out = fn(x)
    if not out.requires_grad:  # detached somewhere: no gradient reaches the input
        return out.detach(), None
    (grad,) = torch.autograd.grad((out * weight).sum(), x)
    return out.detach(), grad


def check_standardize(
    mine: type[torch.nn.Module] | None,
    original: type[torch.nn.Module],
    *,
    backend: str | Callable[..., object],
    device: str,
) -> Feedback:
    """Compile ``mine`` with ``fullgraph=True``; compare results and gradients with ``original``."""
    if mine is None:
        return check(False, "", "define StandardizeMine first")
    compiled = torch.compile(mine(), backend=backend, fullgraph=True)
    reference = original()
    weight = torch.randn(8, 32, generator=torch.Generator().manual_seed(1)).to(device)
    for what, data in probe_inputs(device).items():
        try:
            ours, our_grad = _forward_and_grad(compiled, data, weight)
        except torch._dynamo.exc.TorchDynamoException as error:  # the graph break, its reason
            return check(False, "", f"fullgraph=True refused it: {str(error).splitlines()[0]}")
        with warnings.catch_warnings():  # the original's float() of a tensor that needs grad
            warnings.simplefilter("ignore")
            expected, their_grad = _forward_and_grad(reference, data, weight)
        if not torch.allclose(ours, expected, rtol=1e-4, atol=1e-5, equal_nan=False):
            worst = (ours - expected).abs().nan_to_num(float("inf")).max().item()
            return check(
                False,
                "",
                f"on {what} it differs from the original (largest difference {worst:.3g}): "
                "the original divides only when the standard deviation is above 1e-3, and "
                "returns x - mean as it is otherwise (dividing by a clamped standard deviation, "
                "1e-3, is not the same): choose between dividing and not with torch.where",
            )
        if our_grad is None:
            return check(
                False, "", "its result carries no gradient: keep it differentiable (no detach)"
            )
        finite_theirs = their_grad is not None and bool(torch.isfinite(their_grad).all())
        if finite_theirs and not bool(torch.isfinite(our_grad).all()):
            return check(
                False,
                "",
                f"the results match, but on {what} its gradient is not finite (the original's "
                f"is): {NAN_GRADIENT}",
            )
    return check(
        True,
        "no graph break, the original's result on both sides of the 1e-3 threshold, and "
        "finite gradients on every input",
        "",
    )
