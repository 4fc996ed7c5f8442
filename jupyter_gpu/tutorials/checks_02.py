"""Notebook 02's exercise: pick the precision to train in on a given GPU, from measurements.

The student writes ``pick(measured, gpu) -> mode``. The check runs it on this run's ``%amp
compare`` figures for this GPU, and for GPUs that differ from it in one way (no bf16 and no TF32,
as a T4; less memory for the step), and accepts only a mode the measurements support:

1. measured without an error;
2. computed in hardware there: bf16 and fp16 need units for them, tf32 needs TF32 tensor cores
   (on a GPU without them "tf32" is strict fp32, so a speed measured here says nothing about it
   there);
3. its step's peak fits the memory the GPU has for the step, where that is known;
4. its first step's loss within 2 % of fp32's;
5. and among those, at most 5 % slower than the fastest (the check's tie band).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .exercises import Feedback, check

LOSS_TOLERANCE = 0.02  # of fp32's first-step loss
TIE_BAND = 0.05  # of the fastest supported mode's time


@dataclass(frozen=True)
class ModeMeasurement:
    """One mode's figures from ``%amp compare``: median step time, step peak, first-step loss."""

    mode: str
    time_s: float
    peak_bytes: int | None
    loss: float | None
    loss_diff: float | None


@dataclass(frozen=True)
class GpuFacts:
    """What a GPU (or a CPU) computes in hardware, and the memory a training step may peak at.

    ``step_memory_bytes`` is what a step may add above the weights and optimizer state that are
    already allocated (``None``: no limit known, as on a CPU). Every NVIDIA GPU that torch
    supports computes fp16; a CPU may not (``fp16=False``).
    """

    name: str
    bf16: bool
    tf32: bool
    step_memory_bytes: int | None = None
    fp16: bool = True


Pick = Callable[[Mapping[str, ModeMeasurement], GpuFacts], str]


def measurements(results: Iterable[Any]) -> dict[str, ModeMeasurement]:
    """``%amp compare -o``'s results as :class:`ModeMeasurement`, leaving out failed modes."""
    return {
        r.mode: ModeMeasurement(r.mode, r.time_s, r.peak_bytes, r.loss, r.loss_diff)
        for r in results
        if r.error is None and r.time_s is not None
    }


def judge(measured: Mapping[str, ModeMeasurement], gpu: GpuFacts) -> dict[str, str]:
    """Every measured mode with ``"ok"`` or the reason the measurements rule it out on ``gpu``."""
    verdicts: dict[str, str] = {}
    base = measured.get("fp32")
    reference_loss = base.loss if base is not None else None
    for mode, m in measured.items():
        if mode in ("bf16", "fp16") and not getattr(gpu, mode):
            verdicts[mode] = f"{gpu.name} has no {mode} units: {mode} would be emulated, slowly"
        elif mode == "tf32" and not gpu.tf32:
            verdicts[mode] = (
                f"{gpu.name} has no TF32 tensor cores: tf32 runs as strict fp32 there, so the "
                "tf32 time measured here is not its time"
            )
        elif (
            gpu.step_memory_bytes is not None
            and m.peak_bytes is not None
            and m.peak_bytes > gpu.step_memory_bytes
        ):
            verdicts[mode] = (
                f"its step peaks at {m.peak_bytes / 2**30:.2f} GiB, more than the "
                f"{gpu.step_memory_bytes / 2**30:.2f} GiB {gpu.name} has for a step"
            )
        elif (
            reference_loss
            and m.loss_diff is not None
            and abs(m.loss_diff) > LOSS_TOLERANCE * abs(reference_loss)
        ):
            verdicts[mode] = (
                f"its first step's loss is {m.loss_diff:+.3g} off fp32's ({reference_loss:.3f}), "
                f"more than {LOSS_TOLERANCE:.0%}"
            )
        else:
            verdicts[mode] = "ok"
    fitting = {mode: measured[mode].time_s for mode, v in verdicts.items() if v == "ok"}
    if fitting:
        fastest = min(fitting, key=fitting.__getitem__)
        for mode, seconds in fitting.items():
            if seconds > (1 + TIE_BAND) * fitting[fastest]:
                verdicts[mode] = (
                    f"{seconds / fitting[fastest]:.2f}x the time of {fastest} "
                    f"({seconds * 1e3:.3g} against {fitting[fastest] * 1e3:.3g} ms a step)"
                )
    return verdicts


def check_pick(
    pick: Pick | None, cases: Iterable[tuple[Mapping[str, ModeMeasurement], GpuFacts]]
) -> Feedback:
    """Run ``pick`` on each (measurements, GPU) case; pass if every choice is supported."""
    if pick is None or not callable(pick):
        return check(False, "", "define pick_precision(measured, gpu) first")
    chosen = []
    for measured, gpu in cases:
        try:
            mode = pick(measured, gpu)
        except Exception as error:  # noqa: BLE001  # the student's code: say what it raised
            return check(False, "", f"on {gpu.name} it raised {type(error).__name__}: {error}")
        verdicts = judge(measured, gpu)
        if mode not in verdicts:
            return check(
                False,
                "",
                f"on {gpu.name} it chose {mode!r}; the measured modes are {', '.join(verdicts)}",
            )
        if verdicts[mode] != "ok":
            good = [m for m, v in verdicts.items() if v == "ok"]
            return check(
                False,
                "",
                f"on {gpu.name} it chose {mode}, which the measurements rule out: "
                f"{verdicts[mode]}. They support {' or '.join(good) or 'none'}.",
            )
        chosen.append(f"{mode} on {gpu.name}")
    return check(True, "; ".join(chosen) + ": each supported by the measurements", "")
