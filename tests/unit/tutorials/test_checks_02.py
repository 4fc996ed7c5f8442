"""Notebook 02's exercise check (2.1) rejects choices the measurements do not support."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from jupyter_gpu.tutorials.checks_02 import GpuFacts, ModeMeasurement, check_pick, judge

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
