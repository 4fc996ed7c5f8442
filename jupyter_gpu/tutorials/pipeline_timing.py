"""Notebook 04's input pipelines timed with the one timing method: per-step ratios, intervals.

A step fed by DataLoader workers is not a plain function to time. Its workers prepare batches
ahead of the step (``prefetch_factor`` each): a timed block that starts after they had time to
fill their queue, while another variant was being timed, would be served for free, and the more
workers, the more free batches. So each loader here starts its workers before each of its timed
blocks and stops them after (:class:`FreshBatches`, untimed, through
:class:`~jupyter_gpu.measure.Variant`'s context): every block starts from an empty queue, and no
variant's workers are still busy while another is timed.

A block then runs whole *waves* of steps (``steps_per_block``, at least one batch per worker):
the workers all start their first batch together, so a block of fewer steps than workers would
time one batch's latency, not how fast the workers produce. :func:`compare_pipelines` divides
each block's time by its steps: the :class:`~jupyter_gpu.measure.Comparison` it returns is per
training step, and its ratios are the one timing method's (round-paired, with their interval).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from jupyter_gpu.measure import Comparison, Timing, Variant, compare


@dataclass(frozen=True)
class PipelineVariant:
    """One way to feed the training step, as :func:`compare_pipelines` times it.

    Args:
        step: one training step (it draws one batch).
        steps_per_block: steps in each timed block (:func:`waves` for a loader with workers).
        started: entered before each timed block and left after it, untimed (a loader's
            workers: :meth:`FreshBatches.started`); ``None`` for nothing to start.
    """

    step: Callable[[], object]
    steps_per_block: int = 1
    started: Callable[[], AbstractContextManager[object]] | None = None

    def __post_init__(self) -> None:
        if self.steps_per_block < 1:
            raise ValueError(f"steps_per_block must be at least 1, not {self.steps_per_block}")


def waves(workers: int, count: int) -> int:
    """Steps in ``count`` waves of a loader with ``workers`` workers (one batch per worker each)."""
    return count * max(1, workers)


class FreshBatches(Iterator[Any]):
    """Batches from ``loader``, whose workers run only inside :meth:`started`.

    ``started()`` makes a new iterator (the loader starts its workers and gives each its first
    batches to prepare); leaving it drops the iterator, which stops them (torch's
    ``_MultiProcessingDataLoaderIter`` shuts its workers down when it is deleted). An epoch that
    ends inside a block starts the next one.

    Raises:
        ValueError: the loader keeps its workers between epochs (``persistent_workers=True``):
            its iterator would then be reused, workers and queued batches with it.
    """

    def __init__(self, loader: Any) -> None:
        if getattr(loader, "persistent_workers", False):
            raise ValueError(
                "the loader keeps its workers (persistent_workers=True): each timed block needs "
                "its own; build it with persistent_workers=False"
            )
        self.loader = loader
        self._batches: Iterator[Any] | None = None

    @contextlib.contextmanager
    def started(self) -> Iterator[None]:
        """Start the loader's workers for one block; stop them when it ends."""
        self._batches = iter(self.loader)
        try:
            yield
        finally:
            self._batches = None  # the last reference: the iterator stops its workers

    def __next__(self) -> Any:
        if self._batches is None:
            raise RuntimeError("draw batches inside `with batches.started():`")
        try:
            return next(self._batches)
        except StopIteration:  # an epoch ended inside the block: the next one
            self._batches = iter(self.loader)
            return next(self._batches)


def compare_pipelines(
    variants: Mapping[str, PipelineVariant],
    *,
    device: Any,
    rounds: int,
    warmup: int = 1,
    watch: bool = True,
) -> Comparison:
    """Time ``variants`` in ``rounds`` interleaved rounds; per-step times, ratios with intervals.

    Each round times one block of every variant (``steps_per_block`` steps, its workers started
    before and stopped after), the order reversed every other round, through
    :func:`jupyter_gpu.measure.compare`; each block's time is then divided by its steps. The
    first variant is the baseline of ``ratio(name)``; ``result[name].rate(batch)`` is images/s.

    Raises:
        ValueError: no variants, ``rounds`` < 1 or ``warmup`` < 1.
    """

    def block(variant: PipelineVariant) -> Callable[[], None]:
        def run() -> None:
            for _ in range(variant.steps_per_block):
                variant.step()

        return run

    raw = compare(
        {name: Variant(block(v), v.started) for name, v in variants.items()},
        device=device,
        warmup=warmup,
        rounds=rounds,
        calls=1,
        watch=watch,
        lead_in=False,  # a block is whole waves of a loader started for it: its start counts
    )
    per_step = {
        name: Timing(
            tuple(t / variants[name].steps_per_block for t in raw[name].times_s),
            raw[name].warmup,
            variants[name].steps_per_block,
        )
        for name in raw
    }
    return Comparison(per_step, raw.baseline, raw.rounds, raw.clock, raw.machine, raw.level)
