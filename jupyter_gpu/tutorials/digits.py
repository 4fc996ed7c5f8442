"""Real images that ship with scikit-learn: its 1,797 handwritten digits (8x8), upscaled.

:class:`AugmentedDigits` is a deliberately ordinary, CPU-heavy input pipeline: each item is
upscaled to ``size x size`` with a random rotation, scale and shift (bilinear sampling in
NumPy) plus noise, one image at a time, as many real pipelines do with PIL: enough CPU per
image to starve a GPU when it runs in the training process (notebook 04 measures how much).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

N_CLASSES = 10
#: Mean and standard deviation of the upscaled images, rounded: keeps the inputs near unit scale.
PIXEL_MEAN, PIXEL_STD = 0.2, 0.3
#: The random jitter of each training image: rotation (radians, either way), scale (lower and
#: upper bound), shift (source pixels, either way, on each axis) and Gaussian noise.
MAX_ANGLE_RAD = 0.25
SCALE_RANGE = (0.85, 1.15)
MAX_SHIFT_PX = 0.7
NOISE_STD = 0.05
#: Batches each DataLoader worker keeps ready (each in shared memory until the loop takes it).
PREFETCH_FACTOR = 4


@dataclass(frozen=True)
class DigitsSplit:
    """Images (float32 in [0, 1], shape ``(n, 8, 8)``) and labels (int64) of one split."""

    images: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)


def load_digits_splits(val_fraction: float = 0.2, seed: int = 0) -> tuple[DigitsSplit, DigitsSplit]:
    """scikit-learn's digits, shuffled with ``seed`` and split into (train, validation).

    Raises:
        ValueError: ``val_fraction`` is not between 0 and 0.5.
        ModuleNotFoundError: scikit-learn is not installed (the message says how to get it).
    """
    if not 0 < val_fraction <= 0.5:
        raise ValueError(f"val_fraction must be in (0, 0.5], not {val_fraction}")
    try:  # imported here: only this function needs sklearn (it ships no type information)
        from sklearn.datasets import load_digits  # type: ignore[import-untyped]
    except ImportError as exc:
        from jupyter_gpu.tutorials.install_hint import install_hint

        command, _ = install_hint("tutorials")
        raise ModuleNotFoundError(
            f"the digits come with scikit-learn: pip install scikit-learn (or {command})"
        ) from exc

    bunch = load_digits()
    images = (bunch.images / 16.0).astype(np.float32)
    labels = bunch.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    n_val = int(len(labels) * val_fraction)
    val, train = order[:n_val], order[n_val:]
    return DigitsSplit(images[train], labels[train]), DigitsSplit(images[val], labels[val])


def upscale(
    image: np.ndarray,
    size: int,
    *,
    angle: float = 0.0,
    scale: float = 1.0,
    shift: tuple[float, float] = (0.0, 0.0),
) -> np.ndarray:
    """Resample an ``8 x 8`` image to ``size x size`` by bilinear interpolation.

    ``angle`` (radians), ``scale`` and ``shift`` (in source pixels) move the sampling grid;
    outside the image reads as 0 (background).
    """
    n = image.shape[0]
    padded = np.pad(image, 1)
    cos, sin = np.cos(angle) / scale, np.sin(angle) / scale
    ys, xs = np.mgrid[0:size, 0:size].astype(np.float32)
    # Output pixel centres in source coordinates, centred on the image's middle.
    u = (xs + 0.5) * n / size - n / 2
    v = (ys + 0.5) * n / size - n / 2
    x = cos * u - sin * v + (n - 1) / 2 + shift[0] + 1  # +1: the padding
    y = sin * u + cos * v + (n - 1) / 2 + shift[1] + 1
    x0 = np.clip(np.floor(x).astype(np.int64), 0, n + 1)
    y0 = np.clip(np.floor(y).astype(np.int64), 0, n + 1)
    x1 = np.clip(x0 + 1, 0, n + 1)
    y1 = np.clip(y0 + 1, 0, n + 1)
    fx = np.clip(x - x0, 0.0, 1.0)
    fy = np.clip(y - y0, 0.0, 1.0)
    top = padded[y0, x0] * (1 - fx) + padded[y0, x1] * fx
    bottom = padded[y1, x0] * (1 - fx) + padded[y1, x1] * fx
    out: np.ndarray = (top * (1 - fy) + bottom * fy).astype(np.float32)
    return out


class AugmentedDigits(Dataset[tuple[torch.Tensor, int]]):
    """Digits upscaled to ``size x size`` with random jitter and noise, one item at a time.

    ``length`` items per epoch (images repeat with fresh augmentation). Each item's random
    numbers are seeded from torch's generator, which the DataLoader seeds differently in each
    worker (``base_seed + worker_id``), so workers never repeat each other's augmentation; a
    NumPy ``Generator`` made once and held by the dataset would be copied into every worker and
    repeat. Notebook 04 (section 4, "Random numbers in workers") measures both.

    Raises:
        ValueError: ``size`` < 8 or ``length`` < 1.
    """

    def __init__(self, split: DigitsSplit, size: int, length: int) -> None:
        if size < 8 or length < 1:
            raise ValueError(f"need size >= 8 and length >= 1, got {size=}, {length=}")
        self.split = split
        self.size = size
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        rng = np.random.default_rng(int(torch.randint(0, 2**62, (1,))))
        k = index % len(self.split)
        image = _augment(self.split.images[k], self.size, rng)
        return torch.from_numpy(image)[None], int(self.split.labels[k])


def _augment(image: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """One image upscaled with random jitter from ``rng``, plus noise, normalised."""
    out = upscale(
        image,
        size,
        angle=float(rng.uniform(-MAX_ANGLE_RAD, MAX_ANGLE_RAD)),
        scale=float(rng.uniform(*SCALE_RANGE)),
        shift=(
            float(rng.uniform(-MAX_SHIFT_PX, MAX_SHIFT_PX)),
            float(rng.uniform(-MAX_SHIFT_PX, MAX_SHIFT_PX)),
        ),
    )
    out += rng.normal(0.0, NOISE_STD, out.shape).astype(np.float32)
    normalised: np.ndarray = (out - PIXEL_MEAN) / PIXEL_STD
    return normalised


def upscaled_tensor(split: DigitsSplit, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole split upscaled without augmentation: ``(images (n, 1, size, size), labels)``."""
    images = np.stack([upscale(img, size) for img in split.images])
    images = (images - PIXEL_MEAN) / PIXEL_STD
    return torch.from_numpy(images)[:, None], torch.from_numpy(split.labels)


def augmented_tensor(
    split: DigitsSplit, size: int, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole split with the jitter and noise of :class:`AugmentedDigits`, drawn once.

    ``(images (n, 1, size, size), labels)``, the same for the same ``seed``: a validation set
    from the distribution the model trains on. In eval mode BatchNorm normalises with the
    statistics it gathered from augmented images. Noise-free images (:func:`upscaled_tensor`,
    at 64x64 far smoother than the training images) do not fit those statistics, and a model's
    accuracy on them measures that mismatch as much as what it learned.
    """
    rng = np.random.default_rng(seed)
    images = np.stack([_augment(img, size, rng) for img in split.images])
    return torch.from_numpy(images)[:, None], torch.from_numpy(split.labels)


def digits_loader(
    dataset: AugmentedDigits,
    batch: int,
    *,
    workers: int = 0,
    pin_memory: bool = False,
    persistent_workers: bool | None = None,
) -> DataLoader[tuple[torch.Tensor, int]]:
    """A shuffling loader that drops the last partial batch (steady shapes for the GPU).

    With ``workers > 0`` each worker prefetches ``PREFETCH_FACTOR`` batches (torch's default
    is 2 when ``num_workers > 0``), and the workers stay alive between epochs unless
    ``persistent_workers=False`` (a loader whose workers each timed block starts afresh:
    ``pipeline_timing.FreshBatches``).
    """
    return DataLoader(
        dataset,
        batch_size=batch,
        shuffle=True,
        drop_last=True,
        num_workers=workers,
        pin_memory=pin_memory,
        persistent_workers=workers > 0 if persistent_workers is None else persistent_workers,
        prefetch_factor=PREFETCH_FACTOR if workers > 0 else None,
    )


def _conv(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()
    )


class DigitsCNN(nn.Module):
    """A small VGG-style classifier: four conv stages (each halving the image), then linear."""

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.features = nn.Sequential(
            _conv(1, width),
            nn.MaxPool2d(2),
            _conv(width, 2 * width),
            nn.MaxPool2d(2),
            _conv(2 * width, 4 * width),
            nn.MaxPool2d(2),
            _conv(4 * width, 8 * width),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Linear(8 * width, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.features(x))
        return out


@torch.no_grad()
def accuracy(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, batch: int = 512
) -> float:
    """Fraction of ``images`` that ``model`` classifies right (evaluated in eval mode)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    correct = 0
    for start in range(0, len(labels), batch):
        x = images[start : start + batch].to(device)
        y = labels[start : start + batch].to(device)
        correct += int((model(x).argmax(dim=1) == y).sum())
    model.train(was_training)
    return correct / len(labels)
