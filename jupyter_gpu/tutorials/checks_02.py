"""Notebook 02's exercises: pick a precision from measurements (2.1), an fp16 step (5.1).

**2.1.** The student writes ``pick(measured, gpu) -> mode``. The check runs it on this run's
``%amp compare`` figures of two steps (the GPT's, and a small tabular model's fed raw features
that overflow fp16), each for this GPU and for GPUs that differ from it in one way (no bf16 and
no TF32, as a T4; less memory for the step), and accepts only a mode the measurements support:

1. measured without an error;
2. computed in hardware there: bf16 and fp16 need units for them, tf32 needs TF32 tensor cores
   (on a GPU without them "tf32" is strict fp32, so a speed measured here says nothing about it
   there);
3. its step's peak fits the memory the GPU has for the step, where that is known;
4. its first step's loss finite and within 2 % of fp32's;
5. and among those, at most 5 % slower than the fastest (the check's tie band).

So the hardware alone never gives the answer: where fp16 overflowed, "fp16 where there is no
bf16" is wrong, and where 16 bits made a step slower, "bf16 where there is bf16" is.

**5.1.** :func:`check_fp16_step` runs the student's fp16 step beside a reference twice: once
where the scaled gradients are finite (the weights after one clipped step must match, and the
scaler, built with ``growth_interval=1``, must have grown its scale: ``update()`` was called),
once where they overflow (the step must be skipped and the scale backed off), so a step without
a GradScaler, or one that never calls ``update()``, fails.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F

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
        elif m.loss is not None and not math.isfinite(m.loss):
            verdicts[mode] = (
                f"its first step's loss is {m.loss}: the step overflowed in {mode} (no "
                "GradScaler can help a forward pass whose values exceed the format's range)"
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


@dataclass(frozen=True)
class Case:
    """One question for the student's ``pick``: a step's measurements, on one GPU."""

    step: str
    measured: Mapping[str, ModeMeasurement]
    gpu: GpuFacts

    def where(self) -> str:
        """``the GPT step on this GPU``."""
        return f"{self.step} on {self.gpu.name}"


T4 = GpuFacts("a GPU without bf16 or TF32 (a T4)", bf16=False, tf32=False)


def build_cases(steps: Mapping[str, Mapping[str, ModeMeasurement]], here: GpuFacts) -> list[Case]:
    """The check's questions: each measured step on ``here``, on a T4, and short of memory.

    The T4 (no bf16, no TF32) is asked only when ``here`` has either; the GPU short of memory
    only where a step's memory is known (``here.step_memory_bytes``) and its fp32 peak is above
    its 16-bit peaks: it has room for a 16-bit step (midway between the two peaks), not an fp32
    one. The measurements stay those of this run: a T4's times would differ, its overflows not.

    Every case asked has an answer the measurements support, and the GPU short of memory has
    less than ``here``. It is left out where no mode fits and trains there: on a GPU without
    bf16 (as the 16gb tier emulates one), a step that overflows fp16 has no answer once fp32
    does not fit.
    """
    cases = []
    for step, measured in steps.items():
        cases.append(Case(step, measured, here))
        if here.bf16 or here.tf32:
            cases.append(Case(step, measured, T4))
        peak = {m: r.peak_bytes for m, r in measured.items() if r.peak_bytes}
        half = max((peak[m] for m in ("bf16", "fp16") if m in peak), default=None)
        if here.step_memory_bytes is not None and half and peak.get("fp32", 0) > half:
            tight = (peak["fp32"] + half) // 2
            room = f"{tight / 2**30:.2f} GiB" if tight >= 2**30 else f"{tight / 2**20:.1f} MiB"
            name = f"{here.name} with {room} for a step"
            short = replace(here, name=name, step_memory_bytes=tight)
            if tight < here.step_memory_bytes and "ok" in judge(measured, short).values():
                cases.append(Case(step, measured, short))
    return cases


def check_pick(pick: Pick | None, cases: Iterable[Case]) -> Feedback:
    """Run ``pick`` on each case; pass if every choice is one the measurements support."""
    if pick is None or not callable(pick):
        return check(False, "", "define pick_precision(measured, gpu) first")
    chosen = []
    for case in cases:
        where = case.where()
        try:
            mode = pick(case.measured, case.gpu)
        except Exception as error:  # noqa: BLE001  # the student's code: say what it raised
            return check(False, "", f"for {where} it raised {type(error).__name__}: {error}")
        verdicts = judge(case.measured, case.gpu)
        if mode not in verdicts:
            return check(
                False,
                "",
                f"for {where} it chose {mode!r}; the measured modes are {', '.join(verdicts)}",
            )
        if verdicts[mode] != "ok":
            good = [m for m, v in verdicts.items() if v == "ok"]
            return check(
                False,
                "",
                f"for {where} it chose {mode}, which the measurements rule out: "
                f"{verdicts[mode]}. They support {' or '.join(good) or 'none'}.",
            )
        chosen.append(f"{mode} for {where}")
    return check(True, "; ".join(chosen) + ": each supported by the measurements", "")


Fp16Step = Callable[
    [
        torch.nn.Module,
        torch.optim.Optimizer,
        torch.amp.GradScaler,
        torch.Tensor,
        torch.Tensor,
        float,
    ],
    object,
]
MAX_NORM = 0.05  # small enough that the clip acts on these gradients
FINITE_SCALE = 2.0**12  # the scaled gradients stay within fp16's range
OVERFLOW_SCALE = 2.0**40  # the scaled gradients overflow fp16 (largest 65504, about 2**16)


def _reference_step(
    net: torch.nn.Module,
    opt: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    x: torch.Tensor,
    y: torch.Tensor,
    max_norm: float,
) -> None:
    """PyTorch's AMP example, *Gradient clipping*: unscale, clip, step, update."""
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = F.cross_entropy(net(x), y)
    scaler.scale(loss).backward()  # type: ignore[no-untyped-call]  # torch leaves it untyped
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm)
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)


def _run_both(step: Fp16Step, device: str, init_scale: float) -> tuple[bool, float, float, bool]:
    """Student's step and the reference from one start: (same weights, scales, weights moved)."""
    torch.manual_seed(0)
    first = torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)
    ).to(device)
    nets = [first, copy.deepcopy(first)]
    start = [p.detach().clone() for p in first.parameters()]
    x = torch.randn(32, 64, device=device)
    y = torch.randint(0, 10, (32,), device=device)
    opts = [torch.optim.SGD(n.parameters(), lr=0.5) for n in nets]  # SGD: a wrong clip shows
    # growth_interval=1: after one step without inf the scale doubles, so update() shows.
    scalers = [torch.amp.GradScaler(device, init_scale=init_scale, growth_interval=1) for _ in nets]
    step(nets[0], opts[0], scalers[0], x, y, MAX_NORM)
    _reference_step(nets[1], opts[1], scalers[1], x, y, MAX_NORM)
    pairs = list(zip(nets[0].parameters(), nets[1].parameters(), strict=True))
    same = all(torch.allclose(a, b, rtol=1e-3, atol=1e-5, equal_nan=False) for a, b in pairs)
    moved = any(not torch.equal(a, s) for (a, _), s in zip(pairs, start, strict=True))
    return same, scalers[0].get_scale(), scalers[1].get_scale(), moved


def check_fp16_step(step: Fp16Step | None, device: str) -> Feedback:
    """Exercise 5.1: ``step(net, opt, scaler, x, y, max_norm)`` against PyTorch's recipe.

    Runs twice on copies of a small network (see the module's doc): scaled gradients within
    fp16's range, then overflowing ones.
    """
    if step is None or not callable(step):
        return check(False, "", "define my_fp16_step(net, opt, scaler, x, y, max_norm) first")
    try:
        same, mine, ref, _ = _run_both(step, device, FINITE_SCALE)
    except Exception as error:  # noqa: BLE001  # the student's code: say what it raised
        return check(False, "", f"it raised {type(error).__name__}: {error}")
    if not same:
        return check(
            False,
            "",
            "the weights differ from the reference after one step: did you unscale before "
            "clipping, clip to max_norm, and step through the scaler?",
        )
    if mine != ref:
        return check(
            False,
            "",
            f"the weights are right, but the scaler's scale is {mine:.0f} after the step, where "
            f"scaler.update() makes it {ref:.0f} (this scaler grows after every step without "
            "inf): without a GradScaler, or without update(), the scale never adapts",
        )
    try:
        same, mine, ref, moved = _run_both(step, device, OVERFLOW_SCALE)
    except Exception as error:  # noqa: BLE001
        return check(False, "", f"with overflowing gradients it raised {type(error).__name__}")
    if moved or not same:
        return check(
            False,
            "",
            f"with a loss scale of 2**{math.log2(OVERFLOW_SCALE):.0f} the scaled gradients "
            "overflow fp16, and the reference skips the step; yours changed the weights: "
            "scale the loss with the scaler and step through scaler.step(opt)",
        )
    if mine != ref:
        return check(
            False,
            "",
            f"after an overflow the scale is {mine:.3g}, where scaler.update() backs it off to "
            f"{ref:.3g}: call scaler.update() after scaler.step()",
        )
    return check(
        True,
        f"the same weights as the reference (unscaled, clipped, stepped), the scale grown to "
        f"{FINITE_SCALE * 2:.0f} after a good step, and an overflowing step skipped with the "
        f"scale backed off to 2**{math.log2(ref):.0f}",
        "",
    )
