"""Notebook 03's exercise: compute a full batch's gradients under a memory cap.

The student writes ``step(model, x, y) -> loss``: the gradients of the mean loss over the whole
batch, left in the parameters' ``.grad`` as ``loss.backward()`` on the whole batch leaves them,
and that loss, while peaking under a budget. The budget is measured, not chosen: midway between
the peak of the same computation at half the batch and at the full batch, so the full batch in
one piece does not fit and two halves can.

The check measures the step's peak (:func:`.memory.measured_peak`; on a GPU under a real cap,
``torch.cuda.set_per_process_memory_fraction``) and compares its loss and gradients with the
full batch's. It never steps the optimizer, and it clears the gradients after itself.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .exercises import Feedback, check
from .memory import measured_peak

Step = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], torch.Tensor | None]
LossFn = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]

LOSS_TOLERANCE = 0.01  # relative: bf16 autocast against fp32 differs by far less
GRAD_COSINE = 0.99
GRAD_NORM_TOLERANCE = 0.05


@dataclass
class CapExercise:
    """The measured budget and the full batch's loss and gradients (on the CPU) to compare with.

    Attributes:
        budget_bytes: the most the step may allocate above what is allocated when it starts.
        full_peak_bytes, half_peak_bytes: the measured peaks the budget is the midpoint of.
        source: how the peaks were measured.
    """

    model: torch.nn.Module
    x: torch.Tensor
    y: torch.Tensor
    device: str
    budget_bytes: int
    full_peak_bytes: int
    half_peak_bytes: int
    source: str
    loss: float
    grads: list[torch.Tensor | None]


def _clear(model: torch.nn.Module, device: str) -> None:
    model.zero_grad(set_to_none=True)
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def prepare(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, loss_fn: LossFn, device: str
) -> CapExercise:
    """Measure the full and half batch's peaks and keep the full batch's loss and gradients."""

    def whole(xs: torch.Tensor, ys: torch.Tensor) -> Callable[[], object]:
        return lambda: torch.autograd.backward(loss_fn(model, xs, ys))

    half = max(1, len(x) // 2)
    _clear(model, device)
    half_peak = measured_peak(whole(x[:half], y[:half]), device)
    _clear(model, device)
    losses: list[float] = []

    def full() -> None:
        loss = loss_fn(model, x, y)
        torch.autograd.backward(loss)
        losses.append(float(loss.detach()))

    full_peak = measured_peak(full, device)
    grads = [None if p.grad is None else p.grad.detach().float().cpu() for p in model.parameters()]
    _clear(model, device)
    return CapExercise(
        model=model,
        x=x,
        y=y,
        device=device,
        budget_bytes=(half_peak.bytes + full_peak.bytes) // 2,
        full_peak_bytes=full_peak.bytes,
        half_peak_bytes=half_peak.bytes,
        source=full_peak.source,
        loss=losses[0],
        grads=grads,
    )


def _grad_agreement(exercise: CapExercise) -> tuple[float, float, list[str]]:
    """Cosine and norm ratio of the step's gradients against the full batch's; missing names."""
    dot = mine_sq = ref_sq = 0.0
    missing = []
    for (name, p), ref in zip(exercise.model.named_parameters(), exercise.grads, strict=True):
        if ref is None:
            continue
        if p.grad is None:
            missing.append(name)
            continue
        g = p.grad.detach().float().cpu()
        dot += float((g * ref).sum())
        mine_sq += float((g * g).sum())
        ref_sq += float((ref * ref).sum())
    if mine_sq == 0 or ref_sq == 0:
        return 0.0, 0.0, missing
    return dot / math.sqrt(mine_sq * ref_sq), math.sqrt(mine_sq / ref_sq), missing


def check_step(step: Step | None, exercise: CapExercise) -> Feedback:
    """Run ``step`` once under the budget; pass if it fits and matches the full batch."""
    if step is None or not callable(step):
        return check(False, "", "define my_step(model, x, y) first")
    model, device = exercise.model, exercise.device
    checkpointing = getattr(model, "checkpointing", None)  # a step may switch it on: put it back
    _clear(model, device)
    out: list[torch.Tensor | None] = []
    capped = device == "cuda"
    if capped:  # a real cap: a step that does not fit runs out of memory, as it would on the GPU
        from .session import current_plan
        from .tiers import restore_limit

        total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
        slack = 64 * 2**20  # room for the allocator's rounding; the peak is judged exactly
        # reserved, not allocated: holes in segments that hold live tensors count against a cap
        limit = torch.cuda.memory_reserved() + exercise.budget_bytes + slack
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total))
    try:
        peak = measured_peak(lambda: out.append(step(model, exercise.x, exercise.y)), device)
    except torch.OutOfMemoryError as error:
        first = str(error).split(". ")[0:2]
        _clear(model, device)
        return check(
            False,
            "",
            f"it ran out of memory under the cap ({'. '.join(first)}): the step still holds "
            "more at once than the budget; try micro-batches, checkpointing or 16 bits",
        )
    finally:
        if capped:
            restore_limit(current_plan())
        if checkpointing is not None:
            setattr(model, "checkpointing", checkpointing)  # noqa: B010  # any module's flag
    budget = exercise.budget_bytes
    if out[0] is None:
        _clear(model, device)
        return check(False, "", "return the loss of the whole batch (a tensor or a float)")
    loss = float(out[0].detach()) if torch.is_tensor(out[0]) else float(out[0])
    cosine, ratio, missing = _grad_agreement(exercise)
    _clear(model, device)
    mib = 2**20
    if peak.bytes > budget:
        return check(
            False,
            "",
            f"it peaked {peak.bytes / mib:.1f} MiB above where it started; the budget is "
            f"{budget / mib:.1f} MiB (the full batch in one piece peaks "
            f"{exercise.full_peak_bytes / mib:.1f}): hold less at once",
        )
    if missing:
        return check(False, "", f"no gradient for {', '.join(missing[:3])}: call backward()")
    if abs(loss - exercise.loss) > LOSS_TOLERANCE * abs(exercise.loss):
        return check(
            False,
            "",
            f"its loss {loss:.4f} is not the full batch's {exercise.loss:.4f}: return the mean "
            "over every sequence of the batch",
        )
    if cosine < GRAD_COSINE:
        return check(
            False,
            "",
            f"its gradients point elsewhere (cosine {cosine:.3f} with the full batch's): does "
            "every sequence of the batch count, once?",
        )
    if abs(ratio - 1) > GRAD_NORM_TOLERANCE:
        return check(
            False,
            "",
            f"its gradients are {ratio:.2f} times the full batch's: divide each micro-batch's "
            "loss by the number of micro-batches before backward()",
        )
    return check(
        True,
        f"peaked {peak.bytes / mib:.1f} MiB within the {budget / mib:.1f} MiB budget (the full "
        f"batch peaks {exercise.full_peak_bytes / mib:.1f}); loss {loss:.4f} against "
        f"{exercise.loss:.4f}, gradients cosine {cosine:.4f}, norm ratio {ratio:.3f}",
        "",
    )
