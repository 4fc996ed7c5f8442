"""Measuring a training configuration (3 runs of steps back to back) and the matmul rates.

Each figure of the climb comes from :func:`measure_training`: warm-up steps first (a recompile,
the DataLoader's workers starting), then 3 runs of ``k`` steps queued back to back between two
synchronisations, as a training loop runs them (``k`` so that a run lasts about
``target_run_s``). The median run gives tokens/s and model TFLOP/s; the slowest and fastest
runs give the spread. The allocator's peak over the runs is the step's peak memory.

:func:`model_matmul_rate` is the matmul rate measured here: the model's own GEMMs at the run's
batch, sustained for 2 s (``jupyter_gpu.measure.matmul_rate``), a second figure beside MFU, which
divides by the data-sheet peak (``jupyter_gpu.measure.peaks``). :func:`format_matmul_rate` times one
square product in each format (fp32, TF32, 16-bit), sustained for a second: what a format change
can buy on this GPU. Neither is a ceiling: the model's own GEMMs can run faster than a square
product, and a burst faster than a sustained loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from jupyter_gpu.magics.common.precision import Tf32Settings, set_tf32
from jupyter_gpu.measure.gemms import square_gemm
from jupyter_gpu.measure.matmul_rate import MatmulRate, measure_matmul_rate
from jupyter_gpu.tutorials.timing import Timing, synchronize, time_back_to_back, time_first_call

from .shapes import ModelShape


@dataclass(frozen=True)
class StepFigures:
    """One configuration's training speed: 3 runs of ``timing.calls_per_run`` steps.

    Attributes:
        timing: the runs (seconds per step).
        tokens_per_step: tokens in one step (batch x sequence length).
        flops_per_step: model FLOPs of one step (``6 N + 12 L d T`` per token).
        peak_bytes: the allocator's peak during the runs (``None`` without CUDA).
        first_step_s: the first warm-up step (a compile shows here).
    """

    timing: Timing
    tokens_per_step: int
    flops_per_step: float
    peak_bytes: int | None
    first_step_s: float

    @property
    def tokens_per_s(self) -> float:
        """Tokens per second at the median run."""
        return self.tokens_per_step / self.timing.median_s

    @property
    def tokens_per_s_range(self) -> tuple[float, float]:
        """Tokens per second of the slowest and of the fastest run."""
        times = self.timing.times_s
        return self.tokens_per_step / max(times), self.tokens_per_step / min(times)

    @property
    def tflops(self) -> float:
        """Model TFLOP/s at the median run."""
        return self.flops_per_step / self.timing.median_s / 1e12

    @property
    def spread(self) -> float:
        """(slowest - fastest) / median of the runs."""
        return self.timing.spread

    def describe(self) -> str:
        """E.g. ``412,000 tokens/s (405,100-414,800 over 3 runs of 6 steps), 512.3 TFLOP/s``."""
        low, high = self.tokens_per_s_range
        peak = "" if self.peak_bytes is None else f", peak {self.peak_bytes / 2**30:.1f} GiB"
        return (
            f"{self.tokens_per_s:,.0f} tokens/s ({low:,.0f}-{high:,.0f} over "
            f"{self.timing.runs} runs of {self.timing.calls_per_run} steps), "
            f"{self.tflops:.1f} TFLOP/s{peak}"
        )


def steps_per_run(step_s: float, target_run_s: float, most: int = 20) -> int:
    """Steps in one timed run: about ``target_run_s`` of them, between 1 and ``most``."""
    if step_s <= 0:
        return most
    return max(1, min(most, math.ceil(target_run_s / step_s)))


def measure_training(
    step: Callable[[], object],
    *,
    tokens_per_step: int,
    flops_per_step: float,
    device: str,
    runs: int = 3,
    warmup: int = 2,
    target_run_s: float = 1.5,
    most_steps: int = 20,
) -> StepFigures:
    """Time ``step`` (one training step) as described in the module's docstring.

    Raises:
        ValueError: ``runs`` < 1 or ``warmup`` < 1.
    """
    if runs < 1 or warmup < 1:
        raise ValueError(f"need runs >= 1 and warmup >= 1, got {runs=}, {warmup=}")
    first = last = time_first_call(step, device=device)
    for _ in range(warmup - 1):
        last = time_first_call(step, device=device)
    calls = steps_per_run(last, target_run_s, most_steps)
    cuda = device == "cuda" and torch.cuda.is_available()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    timing = time_back_to_back(step, calls=calls, runs=runs, warmup=0, device=device)
    peak = int(torch.cuda.max_memory_allocated()) if cuda else None
    return StepFigures(timing, tokens_per_step, flops_per_step, peak, first)


def format_matmul_rate(
    dtype: str, *, device: str, size: int = 8192, seconds: float = 1.0
) -> MatmulRate:
    """The sustained rate of a square ``size``-cubed product in ``dtype`` (fp32, tf32, bf16, fp16).

    TF32 is on only for ``tf32`` (strict fp32 for ``fp32``) and put back afterwards; autocast is
    off inside.

    Raises:
        ValueError: an unknown dtype name.
    """
    saved = Tf32Settings.read()
    try:
        set_tf32(dtype == "tf32")
        return measure_matmul_rate([square_gemm(size, dtype)], device=device, seconds=seconds)
    finally:
        saved.apply()
        synchronize(device)


def model_matmul_rate(
    shape: ModelShape, batch: int, dtype: str, *, device: str, seconds: float = 2.0
) -> MatmulRate:
    """The matmul rate measured here on this model's GEMMs at ``batch`` sequences, sustained.

    Its operands take about the memory of the largest product's three matrices (see
    :meth:`.shapes.ModelShape.gemms`); free the training's memory first on a small GPU.

    Raises:
        ValueError: an unknown dtype name.
    """
    return measure_matmul_rate(shape.gemms(batch, dtype), device=device, seconds=seconds)
