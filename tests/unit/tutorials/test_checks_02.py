"""Notebook 02's exercise checks: 2.1 rejects choices the measurements do not support (the
hardware rule among them), 5.1 rejects fp16 steps without a working GradScaler."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pytest

from jupyter_gpu.tutorials.checks_02 import (
    Case,
    GpuFacts,
    ModeMeasurement,
    build_cases,
    check_fp16_step,
    check_pick,
    judge,
)
from tests.tutorial_answers_02_03 import (
    clips_scaled,
    never_updates,
    no_scaler,
    solution_step,
    steps_around_the_scaler,
)

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
CASES = [Case("the GPT step", H200_LIKE, gpu) for gpu in (H200, T4_LIKE, SMALL)]


def pick_solution(measured: Mapping[str, ModeMeasurement], gpu: GpuFacts) -> str:
    """The notebook's solution."""
    ok = {}
    for mode, m in measured.items():
        if mode in ("bf16", "fp16", "tf32") and not getattr(gpu, mode):
            continue
        if gpu.step_memory_bytes is not None and (m.peak_bytes or 0) > gpu.step_memory_bytes:
            continue
        if m.loss is not None and not math.isfinite(m.loss):
            continue  # overflowed
        if m.loss_diff is not None and abs(m.loss_diff) > 0.02 * abs(measured["fp32"].loss or 1):
            continue
        ok[mode] = m.time_s
    best = min(ok.values())
    tied = [mode for mode, t in ok.items() if t <= 1.05 * best]
    return "bf16" if "bf16" in tied else min(tied, key=ok.__getitem__)


def test_precision_pick_accepts_the_solution_in_every_case() -> None:
    feedback = check_pick(pick_solution, CASES)
    assert feedback, feedback.message
    assert "fp16 for the GPT step on a GPU without bf16 or TF32" in feedback.message


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
    cases = [Case("the GPT step", runs, gpu) for gpu in (H200, T4_LIKE, SMALL)]
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


# The tabular step of the notebook (tutorials/tabular.py): raw features of 200,000 overflow fp16
# (a NaN loss), and at this size the step is launch-bound: autocast's casts make 16 bits slower.
# Shaped like a run; the times are illustrative, the NaN is what fp16 does with such inputs.
TABULAR = measured(
    fp32=(0.40, 0.05, 0.0),
    tf32=(0.40, 0.05, 1e-5),
    bf16=(0.55, 0.04, 2e-5),
    fp16=(0.52, 0.04, math.nan),
)
# The same, where 16 bits tie with 32 (within the 5 % band): only the overflow rules fp16 out.
TABULAR_TIED = measured(
    fp32=(0.40, 0.05, 0.0),
    tf32=(0.40, 0.05, 1e-5),
    bf16=(0.41, 0.04, 2e-5),
    fp16=(0.41, 0.04, math.nan),
)


def hardware_rule(m: Mapping[str, ModeMeasurement], gpu: GpuFacts) -> str:
    return "bf16" if gpu.bf16 else "fp16"  # the measurements ignored


def always_fp16(m: Mapping[str, ModeMeasurement], gpu: GpuFacts) -> str:
    return "fp16"


@pytest.mark.parametrize(
    ("wrong", "tabular", "said"),
    [
        (hardware_rule, TABULAR, "1.38x the time of fp32"),  # on this GPU, by its times
        (hardware_rule, TABULAR_TIED, "the step overflowed in fp16"),  # on the T4, by its loss
        (always_fp16, TABULAR, "the step overflowed in fp16"),
        (always_fp16, TABULAR_TIED, "the step overflowed in fp16"),
    ],
)
def test_precision_pick_rejects_the_hardware_rule_where_measurements_contradict_it(
    wrong: object, tabular: dict[str, ModeMeasurement], said: str
) -> None:
    cases = build_cases({"the GPT step": H200_LIKE, "the tabular step": tabular}, H200)
    feedback = check_pick(wrong, cases)  # type: ignore[arg-type]  # a wrong answer on purpose
    assert not feedback
    assert said in feedback.message
    assert "the tabular step" in feedback.message
    solved = check_pick(pick_solution, cases)
    assert solved, solved.message
    # ...and on the GPT step alone the hardware rule passes: the tabular step is what it needs.
    assert check_pick(wrong, build_cases({"the GPT step": H200_LIKE}, H200))  # type: ignore[arg-type]


def test_build_cases_asks_a_t4_and_a_gpu_short_of_memory_where_they_differ() -> None:
    cases = build_cases({"the GPT step": H200_LIKE, "the tabular step": TABULAR}, H200)
    names = [c.where() for c in cases]
    assert names[:2] == ["the GPT step on this GPU", "the GPT step on " + T4_LIKE.name]
    tight = [c.gpu for c in cases if "for a step" in c.gpu.name]
    assert len(tight) == 2  # both steps peak higher in fp32 than in 16 bits
    gpt_tight = tight[0].step_memory_bytes
    assert gpt_tight is not None
    assert int(11.9 * GiB) < gpt_tight < int(20.0 * GiB)  # room for 16 bits, not for fp32
    on_cpu = GpuFacts("this CPU", bf16=False, tf32=False, fp16=False)
    assert [c.gpu for c in build_cases({"s": TABULAR}, on_cpu)] == [on_cpu]  # nothing to vary


def test_build_cases_never_asks_a_question_no_mode_answers() -> None:
    # The 16gb tier on the H200 (GPU run of 2026-12-05): it emulates a GPU without bf16 or TF32,
    # so %amp compare measures fp32 and fp16; the tabular step overflows fp16. A GPU with room
    # for fp16's step but not fp32's would leave no mode, and the notebook's own solution raised
    # on that case ("min() iterable argument is empty").
    no_bf16 = GpuFacts("this GPU", bf16=False, tf32=False, step_memory_bytes=100 * GiB)
    gpt = {m: H200_LIKE[m] for m in ("fp32", "fp16")}
    tabular = {m: TABULAR[m] for m in ("fp32", "fp16")}
    cases = build_cases({"the GPT step": gpt, "the tabular step": tabular}, no_bf16)
    assert [c.where() for c in cases] == [
        "the GPT step on this GPU",
        "the GPT step on this GPU with 15.95 GiB for a step",  # fp16 fits and trains there
        "the tabular step on this GPU",  # and no GPU short of memory: nothing would answer
    ]
    for case in cases:
        assert "ok" in judge(case.measured, case.gpu).values(), case.where()
    solved = check_pick(pick_solution, cases)
    assert solved, solved.message


def test_judge_rules_out_a_nan_loss() -> None:
    verdicts = judge(TABULAR_TIED, H200)
    assert "overflowed" in verdicts["fp16"]
    assert verdicts["bf16"] == "ok"


# ---- exercise 5.1: an fp16 step with a GradScaler and clipping (on the CPU) ----


def test_fp16_step_accepts_the_solution() -> None:
    feedback = check_fp16_step(solution_step, "cpu")
    assert feedback, feedback.message
    assert "backed off to 2**39" in feedback.message


@pytest.mark.parametrize(
    ("wrong", "said"),
    [
        (no_scaler, "without a GradScaler, or without update()"),
        (never_updates, "without a GradScaler, or without update()"),
        (clips_scaled, "the weights differ from the reference"),
        (steps_around_the_scaler, "the reference skips the step"),
        (None, "define my_fp16_step"),
    ],
)
def test_fp16_step_rejects_steps_without_a_working_scaler(wrong: object, said: str) -> None:
    feedback = check_fp16_step(wrong, "cpu")  # type: ignore[arg-type]  # wrong on purpose
    assert not feedback
    assert said in feedback.message
