"""The exercise's check: it finds the steps in what was built, and rejects wrong answers.

The known wrong answers: the unchanged model (no step), one step only, two steps whose measured
speedup misses the target, and a loader and a fused optimizer built but never used (issue 32).
"""

import pytest
import torch
import torch.nn.functional as F

from jupyter_gpu.measure import Timing
from jupyter_gpu.tutorials.capstone.data import endless
from jupyter_gpu.tutorials.capstone.exercise import (
    STEP_NAMES,
    StepWatch,
    applied_steps,
    channels_last,
    check_two_steps,
    verdict,
    watch_autocast,
    watch_step,
)
from jupyter_gpu.tutorials.capstone.steps import StepFigures
from jupyter_gpu.tutorials.digits import DigitsCNN
from jupyter_gpu.tutorials.exercises import ExerciseNotSolvedError, require

BATCH = 8


def images(n: int = 64) -> torch.utils.data.TensorDataset:
    return torch.utils.data.TensorDataset(torch.randn(n, 1, 16, 16), torch.randint(0, 10, (n,)))


def training(*, workers: int = 0, fused: bool = False, autocast: bool = False):
    torch.manual_seed(0)
    model = DigitsCNN(width=4)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=fused or None)
    loader = torch.utils.data.DataLoader(images(), batch_size=BATCH, num_workers=workers)
    batches = endless(loader)

    def step() -> float:
        x, y = next(batches)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss.item()

    return step, model, optimizer, loader


def fast_baseline(tokens_per_s: float) -> StepFigures:
    return StepFigures(Timing((BATCH / tokens_per_s,) * 3, 1, 1), BATCH, 0.0, None, 0.0)


def check(answer, baseline: StepFigures, target: float | None):
    step, model, optimizer, loader = answer
    return check_two_steps(
        step,
        model=model,
        optimizer=optimizer,
        loader=loader,
        baseline=baseline,
        baseline_batch=BATCH,
        device="cpu",
        target=target,
        target_run_s=0.05,
    )


def test_the_unchanged_model_is_rejected_before_anything_is_timed() -> None:
    feedback = check(training(), fast_baseline(1.0), target=None)
    assert not feedback
    assert feedback.found == ()
    assert feedback.speedup is None  # rejected on what was built: nothing was timed
    assert "the unchanged model has none" in feedback.message
    try:
        require(feedback)
    except ExerciseNotSolvedError:
        pass
    else:
        raise AssertionError("require() must raise on the unchanged model")


def test_one_step_is_not_enough() -> None:
    feedback = check(training(fused=True), fast_baseline(1.0), target=None)
    assert not feedback
    assert feedback.found == ("fused optimizer",)


@pytest.mark.slow
def test_two_steps_pass_without_a_target_and_fail_a_missed_one() -> None:
    answer = training(fused=True, autocast=True)
    feedback = check(answer, fast_baseline(1.0), target=None)
    assert feedback, feedback.message
    assert set(feedback.found) == {"fused optimizer", "16-bit autocast"}
    assert feedback.speedup is not None
    assert "only judged on a GPU" in feedback.message
    # The same answer against a baseline a million times faster misses a 1.5x target.
    missed = check(answer, fast_baseline(1e9), target=1.5)
    assert not missed
    assert "profile the step" in missed.message
    passed = check(answer, fast_baseline(1e-3), target=1.5)
    assert passed, passed.message


def test_what_the_check_looks_at() -> None:
    step, model, optimizer, loader = training(workers=1, autocast=True)
    assert watch_autocast(model, step, "cpu") is True
    assert watch_autocast(torch.nn.Linear(2, 2), step, "cpu") is None  # never called
    assert not channels_last(model)
    model = model.to(memory_format=torch.channels_last)
    assert channels_last(model)
    found = applied_steps(
        model=torch.compile(model, backend="eager"),
        optimizer=optimizer,
        loader=loader,
        autocast=True,
        baseline_batch=BATCH // 2,
    )
    assert found == [STEP_NAMES[i] for i in (0, 1, 3, 4, 5)]
    assert verdict(["a", "b"], 2.0, 1.5)
    assert not verdict(["a"], 2.0, 1.5)


def test_a_loader_and_a_fused_optimizer_built_but_never_used_are_rejected() -> None:
    # Issue 32's wrong answer: a worker loader and a fused optimizer are built and passed to the
    # check, while the step still draws from the old loader and steps the old optimizer.
    step, model, _old_optimizer, _old_loader = training()
    unused_optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    unused_loader = torch.utils.data.DataLoader(images(), batch_size=2 * BATCH, num_workers=1)
    feedback = check((step, model, unused_optimizer, unused_loader), fast_baseline(1.0), None)
    assert not feedback
    assert feedback.found == ()
    assert "drew no batch from the loader you passed" in feedback.message
    assert "never stepped the optimizer you passed" in feedback.message
    # the same objects, used by the step, pass
    batches = endless(unused_loader)

    def used_step() -> float:
        x, y = next(batches)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        unused_optimizer.step()
        unused_optimizer.zero_grad()
        return loss.item()

    passed = check((used_step, model, unused_optimizer, unused_loader), fast_baseline(1.0), None)
    assert passed, passed.message
    assert set(passed.found) == {"input pipeline (workers)", "fused optimizer", "larger batch"}


def test_watch_step_sees_what_the_step_used() -> None:
    step, model, optimizer, loader = training(workers=1)
    seen = watch_step(step, model=model, optimizer=optimizer, loader=loader, device="cpu")
    assert seen == StepWatch(autocast=False, optimizer_stepped=True, loader_drawn=True)
    other = torch.utils.data.DataLoader(images(), batch_size=BATCH)
    assert not watch_step(
        step, model=model, optimizer=None, loader=other, device="cpu"
    ).loader_drawn
