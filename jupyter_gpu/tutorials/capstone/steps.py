"""Measuring a training configuration against the one before it, and the matmul rates.

Each row of the climb comes from :func:`compare_steps`, the project's one timing method
(:func:`jupyter_gpu.measure.compare`): the step as it is now and the step as it was before the
fix (run inside a context that undoes the fix: :mod:`.variants`) are timed in interleaved rounds,
the order alternating, with CUDA events on a GPU. Each round times a block of steps queued back
to back, as a training loop runs them. The row's figures are the median round's; its gain over
the row before is the median of the rounds' paired ratios of model FLOP/s, with its interval
(a ratio of model FLOP/s, so that a new batch or a new shape is compared by the work done, not
by the time of one step). The allocator's peak over each variant's blocks is its peak memory.

:func:`measure_training` (3 runs of steps back to back) times a single configuration for a
throughput figure alone, as the exercise's CNN is timed.

:func:`model_matmul_rate` is the matmul rate measured here: the model's own GEMMs at the run's
batch, sustained for 2 s (``jupyter_gpu.measure.matmul_rate``), a second figure beside MFU, which
divides by the data-sheet peak (``jupyter_gpu.measure.peaks``). :func:`format_matmul_rate` times one
square product in each format (fp32, TF32, 16-bit), sustained for a second: what a format change
can buy on this GPU. Neither is a ceiling: the model's own GEMMs can run faster than a square
product, and a burst faster than a sustained loop.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import torch

from jupyter_gpu.magics.probes.precision import Tf32Settings, set_tf32
from jupyter_gpu.measure import Comparison, Ratio, Variant, compare
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
        first_step_s: the first warm-up step (a compile shows here); ``None`` where the runs
            were interleaved with another variant's (:func:`compare_steps`).
        interleaved: the runs were rounds of a comparison, alternating with another variant.
    """

    timing: Timing
    tokens_per_step: int
    flops_per_step: float
    peak_bytes: int | None
    first_step_s: float | None
    interleaved: bool = False

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
        runs = "interleaved runs" if self.interleaved else "runs"
        steps = "step" if self.timing.calls_per_run == 1 else "steps"
        return (
            f"{self.tokens_per_s:,.0f} tokens/s ({low:,.0f}-{high:,.0f} over "
            f"{self.timing.runs} {runs} of {self.timing.calls_per_run} {steps}), "
            f"{self.tflops:.1f} TFLOP/s{peak}"
        )


@dataclass(frozen=True)
class StepWork:
    """What one step of a configuration does: its tokens and its model FLOPs."""

    tokens: int
    flops: float


@dataclass(frozen=True)
class StepComparison:
    """A configuration timed against the one before it, in interleaved rounds.

    Attributes:
        after: the configuration as it is now.
        before: the configuration before the fix, timed in the same rounds (``None``: none).
        gain: ``after``'s model FLOP/s over ``before``'s (tokens/s where no FLOPs are
            counted), the median of the rounds' paired ratios with its interval; ``None``
            without a ``before``.
        comparison: the rounds themselves (variants ``"before"`` and ``"after"``).
    """

    after: StepFigures
    before: StepFigures | None
    gain: Ratio | None
    comparison: Comparison


def scaled_ratio(ratio: Ratio, factor: float) -> Ratio:
    """``ratio`` times a constant ``factor``: every round's paired ratio, so its interval too.

    A ratio of step times becomes one of work per second when the two steps do different work
    (``factor`` = work after / work before); the order statistics scale with it.
    """
    return replace(
        ratio, value=ratio.value * factor, low=ratio.low * factor, high=ratio.high * factor
    )


class _PeakWatch:
    """A variant whose context also reads the allocator's peak over each of its blocks."""

    def __init__(self, variant: Variant, cuda: bool) -> None:
        self.variant = variant
        self.cuda = cuda
        self.peak_bytes: int | None = None

    @contextlib.contextmanager
    def context(self) -> Iterator[None]:
        with self.variant.entered():
            if self.cuda:
                torch.cuda.reset_peak_memory_stats()
            yield
            if self.cuda:  # the block ended with a synchronise: the peak is its own
                peak = int(torch.cuda.max_memory_allocated())
                self.peak_bytes = max(peak, self.peak_bytes or 0)

    def watched(self) -> Variant:
        return Variant(self.variant.run, self.context)


def compare_steps(
    after: Variant | Callable[[], object],
    after_work: StepWork,
    *,
    before: Variant | Callable[[], object] | None = None,
    before_work: StepWork | None = None,
    device: str,
    warmup: int = 1,
    min_rounds: int = 8,
    target_s: float = 1.0,
    block_s: float = 0.2,
) -> StepComparison:
    """Time ``after`` against ``before`` in interleaved rounds (the module's doc says how).

    Args:
        after: the step as it is now (a :class:`Variant` for a context around its blocks).
        after_work: the tokens and model FLOPs of one of its steps.
        before: the step as it was before the fix; ``None`` times ``after`` alone.
        before_work: the work of one of ``before``'s steps (default: ``after_work``).
        device: where the steps run (CUDA events on a GPU, ``perf_counter`` on the CPU).
        warmup: untimed steps of each variant first (a recompile for the other variant's
            batch or module happens here).
        min_rounds: fewest rounds (8 reach a 95 % interval; fewer report their lower level).
        target_s: the rounds go on, in pairs, until this many seconds have passed.
        block_s: about how long one block of steps lasts (at least one step).

    Raises:
        ValueError: ``min_rounds`` or ``warmup`` below 1.
    """
    if min_rounds < 1 or warmup < 1:
        raise ValueError(f"need min_rounds >= 1 and warmup >= 1, got {min_rounds=}, {warmup=}")
    cuda = torch.device(device).type == "cuda" and torch.cuda.is_available()
    watches = {"after": _PeakWatch(after if isinstance(after, Variant) else Variant(after), cuda)}
    if before is not None:
        variant = before if isinstance(before, Variant) else Variant(before)
        watches = {"before": _PeakWatch(variant, cuda), **watches}
    result = compare(
        {name: w.watched() for name, w in watches.items()},
        baseline="before" if before is not None else "after",
        device=device,
        warmup=warmup,
        min_rounds=min_rounds,
        target_s=target_s,
        block_s=block_s,
    )

    def figures(name: str, work: StepWork) -> StepFigures:
        return StepFigures(
            result[name], work.tokens, work.flops, watches[name].peak_bytes, None, interleaved=True
        )

    after_figures = figures("after", after_work)
    if before is None:
        return StepComparison(after_figures, None, None, result)
    work = before_work or after_work
    factor = (
        after_work.flops / work.flops
        if after_work.flops and work.flops
        else after_work.tokens / work.tokens
    )
    gain = scaled_ratio(result.ratio("after"), factor)
    return StepComparison(after_figures, figures("before", work), gain, result)


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
    dtype: str, *, device: str, size: int = 8192, seconds: float = 2.0
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
