"""Notebook 04's pipelines timed with the one timing method: fresh workers per block, per step."""

from __future__ import annotations

import contextlib
import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from jupyter_gpu.tutorials.pipeline_timing import (
    FreshBatches,
    PipelineVariant,
    compare_pipelines,
    waves,
)


def _loader(workers: int, persistent: bool = False) -> DataLoader[Any]:
    data = TensorDataset(torch.arange(64.0)[:, None], torch.arange(64))
    return DataLoader(
        data, batch_size=4, shuffle=True, num_workers=workers, persistent_workers=persistent
    )


def test_fresh_batches_start_workers_for_a_block_and_stop_them_after() -> None:
    batches = FreshBatches(_loader(workers=2))
    with pytest.raises(RuntimeError, match="inside"):
        next(batches)
    with batches.started():
        first = next(batches)
        iterator = batches._batches
        assert iterator is not None
        workers = list(iterator._workers)  # type: ignore[attr-defined]  # torch's own processes
        assert len(workers) == 2
        assert all(w.is_alive() for w in workers)
        gone = weakref.ref(iterator)
        del iterator
    gc.collect()
    assert gone() is None  # the iterator is gone, and with it its workers
    for w in workers:
        w.join(timeout=30)
        assert not w.is_alive()
    assert first[0].shape == (4, 1)
    with batches.started():  # an epoch (16 batches) that ends inside a block starts the next
        drawn = [next(batches) for _ in range(20)]
    assert len(drawn) == 20


def test_fresh_batches_refuse_a_loader_that_keeps_its_workers() -> None:
    with pytest.raises(ValueError, match="persistent_workers=False"):
        FreshBatches(_loader(workers=1, persistent=True))


def test_compare_pipelines_times_blocks_of_whole_waves_per_step() -> None:
    counts: dict[str, int] = {"a": 0, "b": 0}
    entered: list[str] = []

    def step(name: str) -> None:
        counts[name] += 1

    def started(name: str) -> Any:
        @contextlib.contextmanager
        def context() -> Iterator[None]:
            entered.append(name)
            yield

        return context

    variants = {
        "a": PipelineVariant(lambda: step("a"), 3),
        "b": PipelineVariant(lambda: step("b"), waves(2, 2), started("b")),
    }
    result = compare_pipelines(variants, device="cpu", rounds=4, watch=False)
    assert waves(2, 2) == 4
    assert waves(0, 3) == 3  # no workers: the training process makes one batch at a time
    assert counts == {"a": 3 * (4 + 1), "b": 4 * (4 + 1)}  # one warm-up block, then the rounds
    assert entered == ["b"] * 5  # started before each of b's blocks, warm-up included
    assert result.rounds == 4
    assert result["a"].calls_per_run == 3
    assert result["b"].runs == 4
    assert result.baseline == "a"
    assert result.ratio("b").rounds == 4
    with pytest.raises(ValueError, match="at least 1"):
        PipelineVariant(lambda: None, 0)


def test_a_real_loader_is_timed_per_step() -> None:
    batches = FreshBatches(_loader(workers=1))
    seen: list[int] = []

    def train_step() -> None:
        x, _ = next(batches)
        seen.append(len(x))

    result = compare_pipelines(
        {
            "no workers": PipelineVariant(lambda: None, 2),
            "one worker": PipelineVariant(train_step, waves(1, 2), batches.started),
        },
        device="cpu",
        rounds=2,
        watch=False,
    )
    assert len(seen) == 2 * (2 + 1)
    assert result["one worker"].times_s[0] > 0
    assert result["one worker"].calls_per_run == 2
