"""The capstone's exercise: apply two of the steps to a second model, and prove it by measuring.

The second model is notebook 04's digits classifier (:class:`..digits.DigitsCNN`) with its
CPU-heavy augmentation, written the way the capstone's GPT started. :func:`watch_step` runs the
student's step under hooks and sees what it used: whether it called the model (and under
autocast), stepped the optimizer, and drew a batch from the loader. :func:`applied_steps` names
the steps found in what was built **and used**: a loader with workers that the step never draws
from, or a fused optimizer it never steps, counts for nothing. :func:`check_two_steps` passes
when at least two are there **and** the measured speedup over the unchanged model reaches the
target. Speed is only judged on a GPU: elsewhere the figure is shown, and the steps found decide.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data.dataloader import _BaseDataLoaderIter

from jupyter_gpu.tutorials.exercises import Feedback

from .steps import StepFigures, measure_training

# The steps a CNN can take from the capstone, as applied_steps names them.
STEP_NAMES = (
    "input pipeline (workers)",
    "16-bit autocast",
    "fused optimizer",
    "torch.compile",
    "channels_last (the layout tensor cores want)",
    "larger batch",
)


@dataclass(frozen=True)
class StepWatch:
    """What one watched step used.

    Attributes:
        autocast: whether autocast was on when the step called the model (``None``: it never
            called it).
        optimizer_stepped: the optimizer passed took a step (its step hooks ran).
        loader_drawn: the step drew a batch from the loader passed (an iterator of that loader,
            recognised by its batch sampler).
    """

    autocast: bool | None
    optimizer_stepped: bool
    loader_drawn: bool


def watch_step(
    step: Callable[[], object],
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None,
    loader: torch.utils.data.DataLoader[Any] | None,
    device: str,
    most: int = 3,
) -> StepWatch:
    """Run ``step()`` under hooks and say what it used (see :class:`StepWatch`).

    The step runs again, up to ``most`` times, while the optimizer has not stepped: a
    ``GradScaler`` skips an optimizer's step when the first scale overflows in fp16.
    """
    autocast: list[bool] = []
    stepped: list[int] = []
    drawn: list[int] = []
    device_type = torch.device(device).type
    sampler = None if loader is None else loader._index_sampler

    def model_hook(_module: torch.nn.Module, _args: tuple[Any, ...]) -> None:
        autocast.append(torch.is_autocast_enabled(device_type))

    def step_hook(*_args: Any) -> None:
        stepped.append(1)

    real_next = _BaseDataLoaderIter.__next__

    def spying_next(self: _BaseDataLoaderIter) -> Any:
        if sampler is not None and self._index_sampler is sampler:
            drawn.append(1)
        return real_next(self)

    handles = [model.register_forward_pre_hook(model_hook)]
    if optimizer is not None:
        handles.append(optimizer.register_step_post_hook(step_hook))
    _BaseDataLoaderIter.__next__ = spying_next  # type: ignore[method-assign]  # watched, put back
    try:
        for _ in range(max(1, most)):
            step()
            if stepped or optimizer is None:
                break
    finally:
        _BaseDataLoaderIter.__next__ = real_next  # type: ignore[method-assign]
        for handle in handles:
            handle.remove()
    return StepWatch(autocast[0] if autocast else None, bool(stepped), bool(drawn))


def watch_autocast(model: torch.nn.Module, step: Callable[[], object], device: str) -> bool | None:
    """Run ``step()`` once; whether autocast was on when it called ``model`` (``None``: never)."""
    return watch_step(step, model=model, optimizer=None, loader=None, device=device).autocast


def channels_last(model: torch.nn.Module) -> bool:
    """Whether the model's convolution weights (of more than one input channel) are channels-last.

    A weight of one input channel is laid out the same either way, so it tells nothing.
    """
    weights = [p for p in model.parameters() if p.dim() == 4 and p.shape[1] > 1]
    return bool(weights) and all(
        p.is_contiguous(memory_format=torch.channels_last) and not p.is_contiguous()
        for p in weights
    )


def applied_steps(
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: torch.utils.data.DataLoader[Any],
    autocast: bool,
    baseline_batch: int,
    optimizer_used: bool = True,
    loader_used: bool = True,
) -> list[str]:
    """The capstone's steps found in what the student built (names from :data:`STEP_NAMES`).

    ``optimizer_used``/``loader_used`` say whether the step stepped that optimizer and drew
    from that loader (:func:`watch_step`): what it built and did not use counts for nothing.
    """
    found = []
    if loader_used and loader.num_workers > 0:
        found.append(STEP_NAMES[0])
    if autocast:
        found.append(STEP_NAMES[1])
    if optimizer_used and optimizer.defaults.get("fused"):
        found.append(STEP_NAMES[2])
    if hasattr(model, "_orig_mod"):  # what torch.compile returns for a module
        found.append(STEP_NAMES[3])
    if channels_last(model):
        found.append(STEP_NAMES[4])
    if loader_used and (loader.batch_size or 0) > baseline_batch:
        found.append(STEP_NAMES[5])
    return found


def unused(watch: StepWatch) -> str:
    """What the step built and did not use, in words ("" when it used everything)."""
    missing = []
    if not watch.loader_drawn:
        missing.append("it drew no batch from the loader you passed")
    if not watch.optimizer_stepped:
        missing.append("it never stepped the optimizer you passed")
    return "; ".join(missing)


def measure_images(
    step: Callable[[], object], *, images_per_step: int, device: str, target_run_s: float = 1.0
) -> StepFigures:
    """Images per second of ``step`` (``.tokens_per_s`` of the result): 3 runs, as the climb."""
    return measure_training(
        step,
        tokens_per_step=images_per_step,
        flops_per_step=0.0,
        device=device,
        target_run_s=target_run_s,
    )


@dataclass(frozen=True, repr=False)  # shown as a Feedback (its _repr_pretty_ and HTML)
class StepsFeedback(Feedback):
    """The check's outcome, with what it found and measured (for the notebook's summary)."""

    found: tuple[str, ...] = ()
    speedup: float | None = None
    figures: StepFigures | None = None


def verdict(
    found: list[str],
    speedup: float | None,
    target: float | None,
    *,
    need: int = 2,
    figures: StepFigures | None = None,
) -> StepsFeedback:
    """The check's outcome from the steps found and the measured speedup (pure).

    ``speedup`` is ``None`` when nothing was timed (too few steps found).
    """
    named = ", ".join(found) if found else "none"

    def outcome(passed: bool, message: str) -> StepsFeedback:
        return StepsFeedback(passed, message, tuple(found), speedup, figures)

    if len(found) < need or speedup is None:
        hint = (
            f"steps found: {named}. Apply at least {need} of: {', '.join(STEP_NAMES)} "
            "(the unchanged model has none)."
        )
        return outcome(False, hint)
    if target is None:
        text = (
            f"steps found: {named}; measured {speedup:.2f}x the unchanged model (speed is only "
            "judged on a GPU)"
        )
        return outcome(True, text)
    if speedup >= target:
        text = f"steps found: {named}; {speedup:.2f}x the unchanged model (target {target:.2f}x)"
        return outcome(True, text)
    hint = (
        f"steps found: {named}, but only {speedup:.2f}x the unchanged model (target "
        f"{target:.2f}x): profile the step (%%profile) and fix where the GPU waits first."
    )
    return outcome(False, hint)


def check_two_steps(
    step: Callable[[], object],
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: torch.utils.data.DataLoader[Any],
    baseline: StepFigures,
    baseline_batch: int,
    device: str,
    target: float | None,
    target_run_s: float = 1.0,
) -> StepsFeedback:
    """Whether ``step`` applies two steps and beats ``baseline`` by ``target`` (see module doc).

    The steps are looked for first: an answer with fewer than two is rejected before anything
    is timed.
    """
    watch = watch_step(step, model=model, optimizer=optimizer, loader=loader, device=device)
    if watch.autocast is None:
        hint = "the step never called the model you passed: pass the one it trains"
        return StepsFeedback(False, hint)
    found = applied_steps(
        model=model,
        optimizer=optimizer,
        loader=loader,
        autocast=watch.autocast,
        baseline_batch=baseline_batch,
        optimizer_used=watch.optimizer_stepped,
        loader_used=watch.loader_drawn,
    )
    if len(found) < 2:
        feedback = verdict(found, None, target)
        why = unused(watch)
        if why:  # the step ignores part of what was built: say which
            message = f"{feedback.message} Your step: {why}; a step counts only where it is used."
            return StepsFeedback(False, message, feedback.found)
        return feedback
    images = loader.batch_size or 1
    mine = measure_images(step, images_per_step=images, device=device, target_run_s=target_run_s)
    return verdict(found, mine.tokens_per_s / baseline.tokens_per_s, target, figures=mine)
