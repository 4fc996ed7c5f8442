"""The matmul rate measured here: a step's own GEMMs, sustained, timed with the one method.

This is a second figure beside MFU, with its own name ("% of the matmul rate measured here"), and
never a ceiling: a matrix product's rate depends on its shapes, on how long it has run (a GPU
holds its boost clock for a burst and then settles to what its power limit sustains) and on the
day. On the project's H200 (benchmarks/RESULTS.md, *Round 4 on one H200*, 2026-12-03, evening)
a square bf16 8192^3 product read 777.8, 763.4 and 760.0 TFLOP/s in bursts of 10 products and
685.9 sustained over 1.9 s, and the capstone's own 15 GEMM shapes 670.4 together, 517.7 to
706.9 shape by shape. So the rate here is

- **the step's shapes**: the products of :mod:`.gemms` (``model_gemms`` from a model's ``Linear``
  layers, or a list), each run ``count`` times as a step runs them, in their layouts;
- **sustained**: about ``seconds`` of GPU time (2 s by default, at least 1 s to be called
  sustained, as notebook 00 times its matrix products), after warm-up;
- **timed with the one method** (:func:`jupyter_gpu.measure.compare`): each shape a variant,
  interleaved in rounds, CUDA events on a GPU; each round's rate is the step's GEMM FLOPs over
  the round's time for them (each shape's per-call time times its count), and the figure is the
  median round with its order-statistic interval; the machine's steadiness (SM clock, other
  processes) is read while it runs.

Operands are random values (zeros would draw less power and run at a higher clock), carved out of
one buffer per operand and dtype so that many shapes cost the memory of the largest. Autocast is
off inside. ``tf32`` and ``fp32`` run fp32 tensors under the TF32 setting in force: the caller
switches it (``jupyter_gpu.tutorials.capstone.steps.format_matmul_rate`` does).
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .compare import Variant, compare
from .digits import three_digits
from .gemms import GemmShape, step_flops
from .interval import LEVEL, rounds_interval
from .machine import GpuProbe, MachineNotes
from .timing import fmt_seconds

#: What the figure is called wherever it is printed.
NAME = "the matmul rate measured here"
#: GPU time (seconds) below which a rate is a burst, not a sustained rate.
SUSTAINED_S = 1.0
#: Most seconds one timed block lasts (rounds sized so that each shape is timed often).
_MAX_BLOCK_S = 0.05


@dataclass(frozen=True)
class MatmulRate:
    """:data:`NAME`: a step's GEMMs run back to back, their FLOPs over their time.

    Attributes:
        tflops: the median round's rate (TFLOP/s).
        low_tflops, high_tflops: the interval of that median (``level`` coverage).
        level: the interval's coverage.
        rounds: rounds timed (each times every shape once).
        timed_s: seconds of timed blocks, all shapes and rounds together (GPU time with CUDA
            events).
        clock: ``"CUDA events"`` or ``"perf_counter"``.
        device_name: the device's name (``torch.cuda.get_device_name``) or ``"CPU"``.
        gemms: the products timed.
        gemm_tflops: each product's median rate, in the order of ``gemms``.
        machine: whether the machine stayed steady while it ran.
    """

    tflops: float
    low_tflops: float
    high_tflops: float
    level: float
    rounds: int
    timed_s: float
    clock: str
    device_name: str
    gemms: tuple[GemmShape, ...]
    gemm_tflops: tuple[float, ...]
    machine: MachineNotes = field(default_factory=MachineNotes)

    @property
    def sustained(self) -> bool:
        """Whether the GEMMs ran at least :data:`SUSTAINED_S` seconds in all."""
        return self.timed_s >= SUSTAINED_S

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(g.dtype for g in self.gemms))

    def percent_of(self, tflops: float) -> float:
        """``tflops`` as a fraction of this rate (0.88 for 88 %)."""
        return tflops / self.tflops

    def interval_text(self) -> str:
        """``679.4-688.5``: the interval's ends, with the digits of :func:`tflops_text`."""
        return tflops_span(self.low_tflops, self.high_tflops)

    def describe(self) -> str:
        """One sentence: the rate, its interval, how long and on what it ran."""
        shapes = (
            self.gemms[0].describe()
            if len(self.gemms) == 1
            else f"{len(self.gemms)} GEMM shapes ({sum(g.count for g in self.gemms)} products "
            "a step)"
        )
        how_long = (
            f"sustained over {fmt_seconds(self.timed_s)}"
            if self.sustained
            else f"a burst of {fmt_seconds(self.timed_s)}, under the {SUSTAINED_S:g} s a "
            "sustained rate needs"
        )
        notes = "" if self.machine.steady else " Not steady: " + "; ".join(self.machine.notes)
        return (
            f"{NAME}: {tflops_text(self.tflops)} TFLOP/s ({self.interval_text()}, "
            f"{self.level * 100:.0f} % interval over {self.rounds} rounds) on {shapes} in "
            f"{', '.join(self.dtypes)}, {how_long} ({self.clock}), {self.device_name}.{notes}"
        )


def tflops_span(low: float, high: float) -> str:
    """``679.4-688.5``: an interval of rates (TFLOP/s), both ends in :func:`tflops_text`."""
    return f"{tflops_text(low)}-{tflops_text(high)}"


def tflops_text(tflops: float) -> str:
    """``612.3``, or three significant digits below 10: a CPU's ``0.0206``, or ``0.0200``.

    The zeros are kept so that an interval's ends read alike.
    """
    return f"{tflops:.1f}" if tflops >= 9.995 else three_digits(tflops)


_TORCH_DTYPES = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def _operands(gemms: Sequence[GemmShape], device: Any) -> list[Callable[[], object]]:
    """One call per GEMM, on views of shared random buffers (one per operand and dtype)."""
    import torch

    calls: list[Callable[[], object]] = []
    buffers: dict[tuple[str, str], torch.Tensor] = {}
    for dtype in dict.fromkeys(g.dtype for g in gemms):
        same = [g for g in gemms if g.dtype == dtype]
        torch_dtype = getattr(torch, _TORCH_DTYPES[dtype])
        for operand, size in (
            ("a", max(g.m * g.k for g in same)),
            ("b", max(g.k * g.n for g in same)),
        ):
            buffers[dtype, operand] = torch.randn(size, device=device, dtype=torch_dtype)
        buffers[dtype, "c"] = torch.empty(
            max(g.m * g.n for g in same), device=device, dtype=torch_dtype
        )
    for g in gemms:
        a_flat, b_flat, c_flat = (buffers[g.dtype, x] for x in "abc")
        a_used, b_used = a_flat[: g.m * g.k], b_flat[: g.k * g.n]
        a = a_used.view(g.k, g.m).t() if g.a_transposed else a_used.view(g.m, g.k)
        b = b_used.view(g.n, g.k).t() if g.b_transposed else b_used.view(g.k, g.n)
        c = c_flat[: g.m * g.n].view(g.m, g.n)

        def call(a: torch.Tensor = a, b: torch.Tensor = b, c: torch.Tensor = c) -> object:
            return torch.mm(a, b, out=c)

        calls.append(call)
    return calls


def measure_matmul_rate(
    gemms: Sequence[GemmShape],
    *,
    device: Any = None,
    seconds: float = 2.0,
    warmup: int = 2,
    watch: bool = True,
    probe: GpuProbe | None = None,
) -> MatmulRate:
    """Time ``gemms`` as a step runs them, for about ``seconds``; the module's doc says how.

    Args:
        gemms: the products (``model_gemms(model, (batch, seq_len), "bf16")``, or a list).
        device: where to run them: a CUDA device times with CUDA events; ``None``: CUDA if
            available, else the CPU (``perf_counter``).
        seconds: about how long the rounds last, all shapes together, by the clock. The GPU
            time they add up to is a little less, and under :data:`SUSTAINED_S` the rate is a
            burst: ask for 2 s, not 1 (notebook 07 asked for 1.0 and got 989 ms on the H200).
        warmup: untimed calls of each product first.
        watch: read the machine's steadiness while timing (SM clock, GPU processes, CPU load).
        probe: the GPU probe to read (tests); default NVML's for the CUDA device.

    Raises:
        ValueError: no products, or ``seconds`` not positive.
    """
    import torch

    if not gemms:
        raise ValueError("no GEMMs to time")
    if seconds <= 0:
        raise ValueError(f"seconds must be positive, not {seconds}")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    calls = _operands(gemms, dev)

    def no_autocast() -> contextlib.AbstractContextManager[object]:
        return torch.autocast(dev.type, enabled=False)

    variants = {f"{i}": Variant(call, no_autocast) for i, call in enumerate(calls)}
    block_s = max(1e-3, min(_MAX_BLOCK_S, seconds / (len(calls) * 8)))
    result = compare(
        variants,
        device=dev,
        warmup=warmup,
        target_s=seconds,
        block_s=block_s,
        watch=watch,
        probe=probe,
    )
    timings = [result[f"{i}"] for i in range(len(calls))]
    flops = step_flops(gemms)
    per_round = [
        flops / sum(g.count * t.times_s[r] for g, t in zip(gemms, timings, strict=True)) / 1e12
        for r in range(result.rounds)
    ]
    low, high, reached = rounds_interval(per_round, LEVEL)
    timed_s = sum(sum(t.times_s) * t.calls_per_run for t in timings)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "CPU"
    return MatmulRate(
        tflops=statistics.median(per_round),
        low_tflops=low,
        high_tflops=high,
        level=reached,
        rounds=result.rounds,
        timed_s=timed_s,
        clock=result.clock,
        device_name=name,
        gemms=tuple(gemms),
        gemm_tflops=tuple(g.flops / t.median_s / 1e12 for g, t in zip(gemms, timings, strict=True)),
        machine=result.machine,
    )
