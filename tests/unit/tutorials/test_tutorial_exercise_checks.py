"""The checks of notebooks 01, 02 and 03's exercises: a known wrong answer is rejected, the
notebook's solution accepted. Real models and real compiles (``aot_eager``, as in smoke mode)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pytest
import torch
from torch import nn

from jupyter_gpu.tutorials.gpt import GPT, GPTConfig
from jupyter_gpu.tutorials.memory_cap import CapExercise, check_step, prepare
from jupyter_gpu.tutorials.precision_choice import (
    GpuFacts,
    ModeMeasurement,
    check_pick,
    judge,
)
from jupyter_gpu.tutorials.standardize import check_standardize

# ---------------------------------------------------------------- 01, exercise 8.1


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
def quiet_dynamo() -> None:
    torch._dynamo.reset()
    torch._logging.set_logs(dynamo=logging.ERROR)


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


# ---------------------------------------------------------------- 02, exercise 2.1

GiB = 2**30


def measured(**rows: tuple[float, float | None, float]) -> dict[str, ModeMeasurement]:
    """mode=(ms per step, peak GiB, loss minus fp32's), around an fp32 loss of 5.6."""
    return {
        mode: ModeMeasurement(
            mode, ms / 1e3, None if peak is None else int(peak * GiB), 5.6 + diff, diff
        )
        for mode, (ms, peak, diff) in rows.items()
    }


# Shaped like an H200 run of the notebook (times and peaks of 02's full size, rounded).
H200_LIKE = measured(
    fp32=(568.0, 20.0, 0.0),
    tf32=(173.0, 20.0, 4e-5),
    bf16=(76.2, 11.9, 6e-4),
    fp16=(74.7, 11.9, 4e-5),
)
H200 = GpuFacts("this GPU", bf16=True, tf32=True, step_memory_bytes=100 * GiB)
T4_LIKE = GpuFacts("a GPU without bf16 or TF32 (a T4)", bf16=False, tf32=False)
SMALL = GpuFacts(
    "this GPU with 15 GiB for a step", bf16=True, tf32=True, step_memory_bytes=15 * GiB
)
CASES = [(H200_LIKE, H200), (H200_LIKE, T4_LIKE), (H200_LIKE, SMALL)]


def pick_solution(measured: Mapping[str, ModeMeasurement], gpu: GpuFacts) -> str:
    """The notebook's solution."""
    ok = {}
    for mode, m in measured.items():
        if mode in ("bf16", "fp16", "tf32") and not getattr(gpu, mode):
            continue
        if gpu.step_memory_bytes is not None and (m.peak_bytes or 0) > gpu.step_memory_bytes:
            continue
        if m.loss_diff is not None and abs(m.loss_diff) > 0.02 * abs(measured["fp32"].loss or 1):
            continue
        ok[mode] = m.time_s
    best = min(ok.values())
    tied = [mode for mode, t in ok.items() if t <= 1.05 * best]
    return "bf16" if "bf16" in tied else min(tied, key=ok.__getitem__)


def test_precision_pick_accepts_the_solution_in_every_case() -> None:
    feedback = check_pick(pick_solution, CASES)
    assert feedback, feedback.message
    assert "fp16 on a GPU without bf16 or TF32" in feedback.message


# A run in which bf16 came out fastest (bf16 and fp16 are within 2 % of each other at this size).
BF16_FIRST = measured(
    fp32=(568.0, 20.0, 0.0),
    tf32=(173.0, 20.0, 4e-5),
    bf16=(74.1, 11.9, 6e-4),
    fp16=(75.6, 11.9, 4e-5),
)


def fastest(m: Mapping[str, ModeMeasurement], gpu: GpuFacts) -> str:
    return min(m, key=lambda k: m[k].time_s)  # the hardware ignored


@pytest.mark.parametrize(
    ("wrong", "runs", "said"),
    [
        (lambda m, g: "bf16", H200_LIKE, "has no bf16 units"),  # the answer on screen, typed in
        (fastest, BF16_FIRST, "has no bf16 units"),
        (lambda m, g: "tf32", H200_LIKE, "the time of"),
        (lambda m, g: "fp32", H200_LIKE, "the time of"),  # the safe choice, 7x slower here
        (lambda m, g: "int8", H200_LIKE, "the measured modes are"),
        (None, H200_LIKE, "define pick_precision"),
    ],
)
def test_precision_pick_rejects_a_choice_the_measurements_do_not_support(
    wrong: object, runs: dict[str, ModeMeasurement], said: str
) -> None:
    cases = [(runs, gpu) for gpu in (H200, T4_LIKE, SMALL)]
    feedback = check_pick(wrong, cases)  # type: ignore[arg-type]  # a wrong answer on purpose
    assert not feedback
    assert said in feedback.message
    assert check_pick(pick_solution, cases)


def test_precision_judge_rules_out_memory_and_loss() -> None:
    verdicts = judge(H200_LIKE, SMALL)
    assert "more than the 15.00 GiB" in verdicts["fp32"]
    assert "more than the 15.00 GiB" in verdicts["tf32"]
    drifting = measured(fp32=(100.0, None, 0.0), fp16=(40.0, None, 0.5), bf16=(42.0, None, 0.01))
    verdicts = judge(drifting, GpuFacts("a CPU with AMX", bf16=True, tf32=False))
    assert "off fp32's" in verdicts["fp16"]
    assert verdicts["bf16"] == "ok"
    plain_cpu = GpuFacts("a plain CPU", bf16=False, tf32=False, fp16=False)
    assert judge(drifting, plain_cpu) == {
        "fp32": "ok",
        "fp16": "a plain CPU has no fp16 units: fp16 would be emulated, slowly",
        "bf16": "a plain CPU has no bf16 units: bf16 would be emulated, slowly",
    }


# ---------------------------------------------------------------- 03, exercise 4.1


def batch_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return model(x, y)


@pytest.fixture(scope="module")
def exercise() -> CapExercise:
    torch.manual_seed(0)
    model = GPT(GPTConfig(context=64, n_layer=2, n_head=2, d_model=64))
    x = torch.randint(0, 256, (8, 64))
    y = torch.randint(0, 256, (8, 64))
    return prepare(model, x, y, batch_loss, "cpu")


def my_step_solution(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The notebook's solution: four micro-batches, each loss divided by four."""
    micro = 4
    total = torch.zeros(())
    for xs, ys in zip(x.chunk(micro), y.chunk(micro), strict=True):
        loss = batch_loss(model, xs, ys) / micro
        loss.backward()
        total += loss.detach()
    return total


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
    ],
)
def test_memory_cap_rejects_wrong_steps(exercise: CapExercise, wrong: object, said: str) -> None:
    feedback = check_step(wrong, exercise)  # type: ignore[arg-type]
    assert not feedback
    assert said in feedback.message


def test_memory_cap_accepts_checkpointing_and_puts_the_flag_back(exercise: CapExercise) -> None:
    model = exercise.model

    def checkpointed(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        model.checkpointing = True
        return unchanged(model, x, y)

    feedback = check_step(checkpointed, exercise)
    assert feedback, feedback.message
    assert model.checkpointing is False
