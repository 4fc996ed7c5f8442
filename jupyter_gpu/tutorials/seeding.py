"""Random numbers in DataLoader workers: which generators repeat across workers, and the fix.

PyTorch's documentation, "Randomness in multi-process data loading"
(https://pytorch.org/docs/stable/data.html#data-loading-randomness): each worker's PyTorch seed
is ``base_seed + worker_id``, ``base_seed`` drawn by the main process from its RNG (or from the
loader's ``generator``), but "seeds for other libraries may be duplicated upon initializing
workers, causing each worker to return identical random numbers"; a ``worker_init_fn`` can read
the worker's seed (``torch.utils.data.get_worker_info().seed``) and seed them.

What torch 2.x's worker loop does itself (``torch/utils/data/_utils/worker.py``,
``_worker_loop``): it seeds Python's ``random``, torch, and NumPy's *global* RNG
(``np.random.seed``) per worker. It cannot reach a NumPy ``Generator`` that the dataset made
once and holds (``np.random.default_rng(seed)`` in ``__init__``, NumPy's recommended API): every
worker gets a copy of it, in the same state, and draws the same numbers.

:class:`DrawsDataset` shows both side by side; :func:`reseed_held_generator` is the
``worker_init_fn`` that fixes the held one; :func:`draws_by_worker` and :func:`repeats` measure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from torch.utils.data import Dataset, get_worker_info


class DrawsDataset(Dataset[tuple[int, int, float, float]]):
    """Item ``i``: ``(i, worker id, a draw from the Generator it holds, a draw from np.random)``.

    The worker id is -1 in the main process (``num_workers=0``). The held generator is made once,
    here, from ``seed``: the pattern whose copies repeat in every worker.
    """

    def __init__(self, length: int, seed: int = 0) -> None:
        if length < 1:
            raise ValueError(f"length must be at least 1, not {length}")
        self.length = length
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[int, int, float, float]:
        info = get_worker_info()
        worker = info.id if info is not None else -1
        return index, worker, float(self.rng.random()), float(np.random.random())


def reseed_held_generator(worker_id: int) -> None:
    """A ``worker_init_fn``: give this worker's copy of the dataset a generator of its own.

    Seeded from the seed torch gave this worker (``get_worker_info().seed``, which is
    ``base_seed + worker_id``), so the workers differ from each other, and a loader with a
    seeded ``generator`` draws the same numbers on every run.
    """
    info = get_worker_info()
    if info is None:  # called outside a worker: nothing to reseed
        return
    dataset = info.dataset
    if isinstance(dataset, DrawsDataset):
        dataset.rng = np.random.default_rng(info.seed)


@dataclass(frozen=True)
class WorkerDraws:
    """What each worker drew, per generator: ``{worker id: [draws in order]}``."""

    held: Mapping[int, tuple[float, ...]]
    global_numpy: Mapping[int, tuple[float, ...]]


def draws_by_worker(batches: Iterable[object]) -> WorkerDraws:
    """Group a loader's items (of :class:`DrawsDataset`) by the worker that made them.

    ``batches`` are what the loader yields with the default collate: four tensors per batch.
    """
    held: dict[int, list[float]] = {}
    global_numpy: dict[int, list[float]] = {}
    for batch in batches:
        _, workers, from_held, from_global = cast("tuple[Any, Any, Any, Any]", batch)
        for w, a, b in zip(
            torch.as_tensor(workers).tolist(),
            torch.as_tensor(from_held).tolist(),
            torch.as_tensor(from_global).tolist(),
            strict=True,
        ):
            held.setdefault(int(w), []).append(float(a))
            global_numpy.setdefault(int(w), []).append(float(b))
    return WorkerDraws(
        {w: tuple(v) for w, v in held.items()}, {w: tuple(v) for w, v in global_numpy.items()}
    )


def repeats(draws: Mapping[int, tuple[float, ...]]) -> tuple[int, int]:
    """``(draws of the other workers equal to one of the first worker's, their count)``.

    Exact equality: copies of one generator in one state give the very same floats, while two
    independent streams of 64-bit draws practically never meet.
    """
    if len(draws) < 2:
        return 0, 0
    first, *others = sorted(draws)
    seen = set(draws[first])
    values = [v for w in others for v in draws[w]]
    return sum(v in seen for v in values), len(values)
