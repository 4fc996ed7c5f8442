"""Notebook 04's input pipelines: CPU workers sized from the CPU quota, and augmentation on the GPU.

- :func:`shm_workers`: how many DataLoader workers' batches ``/dev/shm`` holds (64 MiB by
  default in Docker and Kubernetes).
- :class:`RawDigitBatches`: shuffled batches of the raw 8x8 digits, one indexing op per batch.
- :func:`resample`, :func:`augment_on_device`: the jitter of :class:`~.digits.AugmentedDigits`
  (rotation, scale, shift, noise, upscaling) for a whole batch in a few tensor ops, on whatever
  device the batch is on: on a GPU a handful of kernels instead of NumPy work per image.
- :class:`Throughput`: images/s of timed windows, with their spread.
"""

from __future__ import annotations

import shutil
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from .digits import (
    MAX_ANGLE_RAD,
    MAX_SHIFT_PX,
    NOISE_STD,
    PIXEL_MEAN,
    PIXEL_STD,
    PREFETCH_FACTOR,
    SCALE_RANGE,
    DigitsSplit,
)

#: Where DataLoader workers put the batches they hand over (only its free space is read).
SHM = Path("/dev/shm")  # noqa: S108  # not a temporary file of ours


def shm_workers(batch_bytes: int, shm: Path = SHM) -> int | None:
    """Workers whose prefetched batches fit in half the free space of ``shm``; ``None``: no shm.

    A worker hands each batch to the training process through shared memory, and keeps up to
    ``PREFETCH_FACTOR`` of them ready: ``workers x PREFETCH_FACTOR x batch_bytes`` can sit there
    at once. Half the free space leaves room for everything else that uses it.
    """
    try:
        free = shutil.disk_usage(shm).free
    except OSError:
        return None
    return int(free / 2 // (PREFETCH_FACTOR * batch_bytes))


class RawDigitBatches(Iterator[tuple[torch.Tensor, torch.Tensor]]):
    """Endless shuffled batches of the raw digits: ``(images (B, 1, 8, 8) float32, labels (B,))``.

    One fancy-indexing op per batch, no per-image Python. Each pass over the split is a new
    shuffle (the remainder that does not fill a batch is skipped). With ``pin`` each batch is
    copied into page-locked memory (needs CUDA), so that ``.to(device, non_blocking=True)`` is
    asynchronous.

    Raises:
        ValueError: ``batch`` is not between 1 and the split's size.
    """

    def __init__(self, split: DigitsSplit, batch: int, *, pin: bool = False, seed: int = 0):
        if not 1 <= batch <= len(split):
            raise ValueError(f"batch must be from 1 to {len(split)} images, not {batch}")
        self.images = torch.from_numpy(split.images)[:, None].contiguous()
        self.labels = torch.from_numpy(split.labels)
        self.batch = batch
        self.pin = pin
        self._generator = torch.Generator().manual_seed(seed)
        self._order = torch.empty(0, dtype=torch.int64)
        self._next = 0

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._next + self.batch > len(self._order):
            self._order = torch.randperm(len(self.labels), generator=self._generator)
            self._next = 0
        picked = self._order[self._next : self._next + self.batch]
        self._next += self.batch
        images, labels = self.images[picked], self.labels[picked]
        if self.pin:
            images, labels = images.pin_memory(), labels.pin_memory()
        return images, labels


def resample(
    images: torch.Tensor,
    size: int,
    angle: torch.Tensor,
    scale: torch.Tensor,
    shift: torch.Tensor,
) -> torch.Tensor:
    """:func:`~.digits.upscale` for a whole batch: ``(B, 1, n, n)`` to ``(B, 1, size, size)``.

    ``angle`` (radians) and ``scale`` have one value per image, ``shift`` two (x, y, in source
    pixels). ``affine_grid`` maps each output pixel into its source image (rotation and scale in
    the 2x2 part of each matrix, the shift in its last column, in the [-1, 1] coordinates of
    ``align_corners=False``, where pixel ``p`` of ``n`` sits at ``(2p + 1) / n - 1``);
    ``grid_sample`` reads it bilinearly, zero outside, as ``upscale`` does.

    Raises:
        ValueError: ``images`` is not ``(B, 1, n, n)`` or ``size`` < 1.
    """
    if images.dim() != 4 or images.shape[1] != 1 or images.shape[2] != images.shape[3]:
        raise ValueError(f"need a batch of shape (B, 1, n, n), got {tuple(images.shape)}")
    if size < 1:
        raise ValueError(f"size must be at least 1, not {size}")
    count, n = images.shape[0], images.shape[-1]
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    dx, dy = shift[:, 0] * 2 / n, shift[:, 1] * 2 / n  # source pixels -> [-1, 1] units
    theta = torch.stack([torch.stack([cos, -sin, dx], 1), torch.stack([sin, cos, dy], 1)], 1)
    grid = F.affine_grid(theta, [count, 1, size, size], align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def augment_on_device(
    images: torch.Tensor, size: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """The jitter of :class:`~.digits.AugmentedDigits` for a whole batch, normalised.

    Draws a rotation, scale and shift per image from the same ranges as the CPU dataset, on
    the batch's device, :func:`resample` s the batch, adds the same noise, and normalises: a
    handful of kernels for the batch instead of NumPy work per image. ``generator`` must be on
    the batch's device.

    Raises:
        ValueError: as :func:`resample`.
    """
    draws = torch.rand(images.shape[0], 4, device=images.device, generator=generator)
    angle = (2 * draws[:, 0] - 1) * MAX_ANGLE_RAD
    scale = SCALE_RANGE[0] + draws[:, 1] * (SCALE_RANGE[1] - SCALE_RANGE[0])
    shift = (2 * draws[:, 2:] - 1) * MAX_SHIFT_PX
    out = resample(images, size, angle, scale, shift)
    noise = torch.randn(out.shape, device=out.device, generator=generator)
    return (out + NOISE_STD * noise - PIXEL_MEAN) / PIXEL_STD


@dataclass(frozen=True)
class Throughput:
    """images/s of each timed window of one measurement."""

    windows: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.windows or min(self.windows) <= 0:
            raise ValueError(f"need one positive rate per window, got {self.windows}")

    @property
    def median(self) -> float:
        """The median window (what the notebook quotes)."""
        return statistics.median(self.windows)

    @property
    def spread(self) -> float:
        """(fastest - slowest window) / median: how much this measurement varied."""
        return (max(self.windows) - min(self.windows)) / self.median

    def __str__(self) -> str:
        return (
            f"{self.median:,.0f} images/s (windows {min(self.windows):,.0f} to "
            f"{max(self.windows):,.0f})"
        )
