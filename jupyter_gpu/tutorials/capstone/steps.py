"""Measuring a training configuration: 3 runs of steps back to back, and the matmul ceiling.

Each figure of the climb comes from :func:`measure_training`: warm-up steps first (a recompile,
the DataLoader's workers starting), then 3 runs of ``k`` steps queued back to back between two
synchronisations, as a training loop runs them (``k`` so that a run lasts about
``target_run_s``). The median run gives tokens/s and model TFLOP/s; the slowest and fastest
runs give the spread. The allocator's peak over the runs is the step's peak memory.

:func:`matmul_ceiling` is what a plain matrix product of the same dtype reaches on this device:
the denominator of MFU (model FLOPs utilisation) in the climb.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from jupyter_gpu.magics.common.precision import Tf32Settings, set_tf32
from jupyter_gpu.tutorials.timing import Timing, synchronize, time_back_to_back, time_first_call


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


@dataclass(frozen=True)
class Ceiling:
    """The best TFLOP/s of a square matrix product on this device, for one dtype."""

    dtype: str
    tflops: float
    size: int

    def describe(self) -> str:
        """E.g. ``bf16 matmul 8192 x 8192: 781.2 TFLOP/s``."""
        return f"{self.dtype} matmul {self.size} x {self.size}: {self.tflops:.1f} TFLOP/s"


_DTYPES = {
    "fp32": (torch.float32, False),
    "tf32": (torch.float32, True),
    "bf16": (torch.bfloat16, False),
    "fp16": (torch.float16, False),
}


def matmul_ceiling(
    dtype: str, *, device: str, sizes: tuple[int, ...] = (4096, 8192), calls: int = 10
) -> Ceiling:
    """The fastest of ``a @ b`` over square ``sizes`` in ``dtype`` (fp32, tf32, bf16, fp16).

    Each size: 3 runs of ``calls`` products back to back after warm-up; its median counts.
    TF32 is on only for ``tf32`` (and put back afterwards); autocast is off inside.

    Raises:
        ValueError: an unknown dtype name.
    """
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(_DTYPES)}, not {dtype!r}")
    torch_dtype, tf32 = _DTYPES[dtype]
    saved = Tf32Settings.read()
    best = Ceiling(dtype, 0.0, sizes[0])
    try:
        set_tf32(tf32)
        device_type = torch.device(device).type
        with torch.autocast(device_type, enabled=False):
            for size in sizes:
                a = torch.randn(size, size, device=device, dtype=torch_dtype)
                b = torch.randn(size, size, device=device, dtype=torch_dtype)

                def product(a: torch.Tensor = a, b: torch.Tensor = b) -> torch.Tensor:
                    return a @ b

                timing = time_back_to_back(product, calls=calls, runs=3, warmup=2, device=device)
                rate = 2 * size**3 / timing.median_s / 1e12
                if rate > best.tflops:
                    best = Ceiling(dtype, rate, size)
                del a, b
    finally:
        saved.apply()
        synchronize(device)
    return best
