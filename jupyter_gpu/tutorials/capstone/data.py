"""The student's input pipeline: windows of text tokenised and augmented in Python, per sample.

:class:`NoisyWindows` is the ordinary way to write a language-model dataset: each item picks a
random window of the corpus (the Python standard library's source, as bytes), walks it byte by
byte in Python to build the token list, replacing about 2 % of the input bytes with a MASK
token (a denoising augmentation), and makes tensors of it. The targets are the clean window
shifted by one. That Python loop is the CPU work a DataLoader either does between training steps
(``num_workers=0``) or in worker processes, in parallel with the GPU.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import TypeVar

import torch
from torch.utils.data import DataLoader, Dataset

from .shapes import MASK_ID

T = TypeVar("T")


class NoisyWindows(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """``length`` random windows of ``seq_len + 1`` bytes of ``data``, noised in Python.

    Item ``i`` is the same window and noise every time (its RNG is seeded from ``seed`` and
    ``i``), so two workers never repeat each other's samples.

    Raises:
        ValueError: ``data`` is not longer than ``seq_len + 1``, or ``noise`` is not in [0, 1).
    """

    def __init__(
        self, data: bytes, seq_len: int, *, length: int, noise: float = 0.02, seed: int = 0
    ) -> None:
        if len(data) <= seq_len + 1:
            raise ValueError(f"need more than {seq_len + 1} bytes of text, have {len(data)}")
        if not 0.0 <= noise < 1.0:
            raise ValueError(f"noise must be in [0, 1), not {noise}")
        self.data = data
        self.seq_len = seq_len
        self.length = length
        self.noise = noise
        self.seed = seed

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        rng = random.Random(self.seed * 1_000_003 + index)  # noqa: S311 (augmentation, not crypto)
        start = rng.randrange(len(self.data) - self.seq_len - 1)
        window = self.data[start : start + self.seq_len + 1]
        inputs = []
        for byte in window[:-1]:  # the student's augmentation: one Python step per byte
            inputs.append(MASK_ID if rng.random() < self.noise else byte)
        return torch.tensor(inputs), torch.tensor(list(window[1:]))


def student_loader(
    dataset: NoisyWindows, batch: int
) -> DataLoader[tuple[torch.Tensor, torch.Tensor]]:
    """The DataLoader a student writes first: every batch made in the training process."""
    return DataLoader(dataset, batch_size=batch)


def worker_loader(
    dataset: NoisyWindows, batch: int, *, workers: int, pin_memory: bool
) -> DataLoader[tuple[torch.Tensor, torch.Tensor]]:
    """Batches made by ``workers`` processes ahead of time, into pinned memory if asked.

    The workers stay alive between epochs and each keeps 4 batches ready.
    """
    return DataLoader(
        dataset,
        batch_size=batch,
        num_workers=workers,
        pin_memory=pin_memory,
        persistent_workers=workers > 0,
        prefetch_factor=4 if workers > 0 else None,
        drop_last=True,
    )


def endless(loader: DataLoader[T]) -> Iterator[T]:
    """The loader's batches, epoch after epoch."""
    while True:
        yield from loader
