"""Notebook 03's exercise: a full batch's gradients under a memory cap, with checkpointing.

The student writes ``step(model, x, y) -> loss``: the gradients of the mean loss over the whole
batch, left in the parameters' ``.grad`` as ``loss.backward()`` on the whole batch leaves them,
and that loss, while peaking under a budget, by wrapping each transformer block in
``torch.utils.checkpoint.checkpoint`` themselves. The budget is measured, not chosen: midway
between the peak of the same computation at half the batch and at the full batch, so the full
batch in one piece does not fit.

The check measures the step's peak (:func:`.memory.measured_peak`; on a GPU under a real cap,
``torch.cuda.set_per_process_memory_fraction``) and compares its loss and gradients with the
full batch's. It also watches how the step got there, so that only checkpointing written with
``torch.utils.checkpoint`` passes:

- the model's own switch (``GPT.checkpointing``) must stay off: a forward pre-hook on every block
  reads it while the step runs;
- every block must run again during the backward pass (the recomputation): a forward hook counts
  each block's calls, and one call means the block's activations were kept;
- autograd must keep at most :data:`CKPT_SAVED_FRACTION` of the activations a plain forward pass
  keeps: a ``saved_tensors_hooks`` pair around the step counts what autograd saved outside the
  checkpointed blocks (micro-batches fit too, but keep every activation of each micro-batch).

It never steps the optimizer, and it clears the gradients after itself.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .exercises import Feedback, check
from .memory import measured_peak, saved_tensor_bytes

Step = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], torch.Tensor | None]
LossFn = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]

LOSS_TOLERANCE = 0.01  # relative: bf16 autocast against fp32 differs by far less
GRAD_COSINE = 0.99
GRAD_NORM_TOLERANCE = 0.05
CKPT_SAVED_FRACTION = 0.5
"""Most of a plain forward's saved activations a checkpointed step may keep (the GPT of notebook
03 keeps 9 to 16 %: the block inputs are kept by checkpoint itself, the head's and the loss's by
autograd)."""


@dataclass
class CapExercise:
    """The measured budget and the full batch's loss and gradients (on the CPU) to compare with.

    Attributes:
        budget_bytes: the most the step may allocate above what is allocated when it starts.
        full_peak_bytes, half_peak_bytes: the measured peaks the budget is the midpoint of.
        source: how the peaks were measured.
        plain_saved_bytes: what autograd saves in one plain forward pass of the whole batch.
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
    plain_saved_bytes: int = 0


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
    plain_saved = saved_tensor_bytes(lambda: loss_fn(model, x, y))
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
        plain_saved_bytes=plain_saved,
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


class _StepWatch:
    """How a step computed its loss: block calls, the model's own switch, the bytes autograd kept.

    Entered around the student's step: a forward pre-hook on each of ``model.blocks`` counts the
    block's calls and reads ``model.checkpointing``; a ``saved_tensors_hooks`` pair counts the
    bytes autograd saves (each storage once, parameters left out) and hands each tensor back
    unchanged, so the backward pass runs as it would without it. Tensors saved inside a
    ``torch.utils.checkpoint`` region go to checkpoint's own hooks, innermost first, and are not
    counted: that is what checkpointing saves.
    """

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        blocks = getattr(model, "blocks", None)
        self.blocks: list[torch.nn.Module] = list(blocks) if blocks is not None else []
        self.calls = [0] * len(self.blocks)
        self.flag_used = False
        self.saved_bytes = 0
        self._seen: set[tuple[int, int]] = set()
        self._handles: list[torch.utils.hooks.RemovableHandle] = []
        self._saving = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        if not isinstance(t, torch.nn.Parameter):
            storage = t.untyped_storage()
            key = (storage.data_ptr(), storage.nbytes())
            if key not in self._seen:
                self._seen.add(key)
                self.saved_bytes += storage.nbytes()
        return t

    @staticmethod
    def _unpack(t: torch.Tensor) -> torch.Tensor:
        return t

    def __enter__(self) -> _StepWatch:
        for i, block in enumerate(self.blocks):
            self._handles.append(block.register_forward_pre_hook(self._counter(i)))
        self._saving.__enter__()
        return self

    def _counter(self, i: int) -> Callable[..., None]:
        def count(module: torch.nn.Module, args: object) -> None:
            self.calls[i] += 1
            self.flag_used = self.flag_used or bool(getattr(self.model, "checkpointing", False))

        return count

    def __exit__(self, *exc: object) -> None:
        self._saving.__exit__(*exc)
        for handle in self._handles:
            handle.remove()
        self._seen.clear()


def check_step(step: Step | None, exercise: CapExercise) -> Feedback:
    """Run ``step`` once under the budget; pass if it checkpoints, fits and matches the batch."""
    if step is None or not callable(step):
        return check(False, "", "define my_step(model, x, y) first")
    model, device = exercise.model, exercise.device
    checkpointing = getattr(model, "checkpointing", None)  # a step may switch it on: put it back
    if checkpointing is not None:
        setattr(model, "checkpointing", False)  # noqa: B010  # the student writes it instead
    _clear(model, device)
    out: list[torch.Tensor | None] = []
    capped = device == "cuda"
    if capped:  # a real cap: a step that does not fit runs out of memory, as it would on the GPU
        from .session import current_plan
        from .tiers import allocator_fraction, restore_limit

        # The cap this process had, put back after: a plan made only now (a process that never
        # called begin()) would be made under the step's cap, and keep it.
        cap_before = allocator_fraction(torch.cuda.current_device())
        total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
        slack = 64 * 2**20  # room for the allocator's rounding; the peak is judged exactly
        # reserved, not allocated: holes in segments that hold live tensors count against a cap
        limit = torch.cuda.memory_reserved() + exercise.budget_bytes + slack
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total))
    watch = _StepWatch(model)
    try:
        with watch:
            peak = measured_peak(lambda: out.append(step(model, exercise.x, exercise.y)), device)
    except torch.OutOfMemoryError as error:
        first = str(error).split(". ")[0:2]
        _clear(model, device)
        return check(
            False,
            "",
            f"it ran out of memory under the cap ({'. '.join(first)}): the step still holds "
            "more at once than the budget; wrap each block in torch.utils.checkpoint.checkpoint",
        )
    finally:
        if capped:
            if cap_before is None:  # a torch that cannot say: the plan's cap
                restore_limit(current_plan())
            else:
                torch.cuda.set_per_process_memory_fraction(cap_before)
        if checkpointing is not None:
            setattr(model, "checkpointing", checkpointing)  # noqa: B010  # any module's flag
    budget = exercise.budget_bytes
    if watch.flag_used:
        _clear(model, device)
        return check(
            False,
            "",
            "it switched on the model's own checkpointing (model.checkpointing = True), which "
            "calls torch.utils.checkpoint for you: write it yourself, each block's call wrapped "
            "in checkpoint(block, h, model.rope, use_reentrant=False)",
        )
    if not out or out[0] is None:
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
    once = [i for i, n in enumerate(watch.calls) if n < 2]
    if once:
        return check(
            False,
            "",
            f"block {once[0]} of {len(watch.calls)} ran once, so its activations were kept for "
            "the backward pass rather than recomputed in it: wrap every block's call in "
            "torch.utils.checkpoint.checkpoint",
        )
    plain = exercise.plain_saved_bytes
    if plain and watch.saved_bytes > CKPT_SAVED_FRACTION * plain:
        return check(
            False,
            "",
            f"autograd kept {watch.saved_bytes / mib:.1f} MiB of activations, "
            f"{watch.saved_bytes / plain:.0%} of the {plain / mib:.1f} MiB a plain forward pass "
            "keeps: it fits, but every activation was saved (micro-batches do that); "
            "checkpointing keeps only each block's input: wrap each block in "
            "torch.utils.checkpoint.checkpoint",
        )
    share = f" ({watch.saved_bytes / plain:.0%} of a plain forward's {plain / mib:.1f})"
    kept = f"{watch.saved_bytes / mib:.1f} MiB" + (share if plain else "")
    return check(
        True,
        f"peaked {peak.bytes / mib:.1f} MiB within the {budget / mib:.1f} MiB budget (the full "
        f"batch peaks {exercise.full_peak_bytes / mib:.1f}); every block recomputed in the "
        f"backward pass; autograd kept {kept} outside the checkpointed blocks; loss {loss:.4f} "
        f"against {exercise.loss:.4f}, gradients cosine {cosine:.4f}, norm ratio {ratio:.3f}",
        "",
    )
