"""The student's input pipeline: noisy windows made in Python, the same for the same index."""

import torch

from jupyter_gpu.tutorials.capstone.data import NoisyWindows, endless, student_loader, worker_loader
from jupyter_gpu.tutorials.capstone.shapes import MASK_ID

TEXT = bytes(range(256)) * 64


def test_windows_are_repeatable_and_noised_in_the_inputs_only() -> None:
    data = NoisyWindows(TEXT, 512, length=100, noise=0.1, seed=3)
    x, y = data[7]
    again_x, again_y = data[7]
    assert torch.equal(x, again_x)
    assert torch.equal(y, again_y)
    assert x.shape == y.shape == (512,)
    masked = x == MASK_ID
    assert 0.03 < masked.float().mean() < 0.2  # about 10 %
    # Unmasked inputs are the bytes before each target: the clean window, shifted by one.
    assert torch.equal(x[1:][~masked[1:]], y[:-1][~masked[1:]])
    assert not (y == MASK_ID).any()
    assert not torch.equal(data[8][1], y)


def test_loaders() -> None:
    data = NoisyWindows(TEXT, 32, length=16, noise=0.0)
    x, _y = next(iter(student_loader(data, 4)))
    assert x.shape == (4, 32)
    loader = worker_loader(data, 8, workers=1, pin_memory=False)
    assert loader.num_workers == 1
    batches = endless(loader)
    shapes = [next(batches)[0].shape for _ in range(3)]  # past the end of the 2-batch epoch
    assert shapes == [(8, 32)] * 3
