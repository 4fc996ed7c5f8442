"""The digits pipeline: real images, correct resampling, a loader, a classifier."""

import numpy as np
import pytest
import torch

from jupyter_gpu.tutorials.digits import (
    AugmentedDigits,
    DigitsCNN,
    accuracy,
    digits_loader,
    load_digits_splits,
    upscale,
    upscaled_tensor,
)


def test_splits_cover_the_bundled_digits() -> None:
    train, val = load_digits_splits(val_fraction=0.2)
    assert len(train) + len(val) == 1797
    assert len(val) == 359
    assert train.images.shape[1:] == (8, 8)
    assert train.images.min() >= 0.0
    assert train.images.max() <= 1.0
    assert set(np.unique(train.labels)) == set(range(10))
    with pytest.raises(ValueError, match="val_fraction"):
        load_digits_splits(val_fraction=0.0)


def test_upscale_without_jitter_keeps_the_picture() -> None:
    image = np.zeros((8, 8), np.float32)
    image[2:6, 3] = 1.0  # a vertical bar
    big = upscale(image, 32)
    assert big.shape == (32, 32)
    # Nearest 4x4 block of the upscaled image that covers source pixel (3, 3) is bright,
    # and a block far from the bar stays dark.
    assert big[13:15, 13:15].mean() > 0.8
    assert big[0:4, 28:32].max() < 1e-6
    # Mean brightness is roughly preserved by interpolation.
    assert abs(big.mean() - image.mean()) < 0.03


def test_dataset_items_vary_and_have_the_right_shape() -> None:
    train, _ = load_digits_splits()
    ds = AugmentedDigits(train, 16, length=50)
    x1, y1 = ds[0]
    x2, y2 = ds[0]
    assert x1.shape == (1, 16, 16)
    assert y1 == y2 == int(train.labels[0])
    assert not torch.equal(x1, x2)  # fresh augmentation per draw
    with pytest.raises(ValueError, match="size"):
        AugmentedDigits(train, 4, 10)


def test_loader_and_model_train() -> None:
    torch.manual_seed(0)
    train, val = load_digits_splits()
    loader = digits_loader(AugmentedDigits(train, 16, length=64 * 8), 64)
    model = DigitsCNN(width=8)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for x, y in loader:
        assert x.shape == (64, 1, 16, 16)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    assert len(losses) == 8
    assert np.mean(losses[-3:]) < losses[0]
    val_x, val_y = upscaled_tensor(val, 16)
    assert val_x.shape == (359, 1, 16, 16)
    assert 0.0 <= accuracy(model, val_x, val_y) <= 1.0
