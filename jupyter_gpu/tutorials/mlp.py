"""The launch-bound case: a deep, narrow MLP at a small batch.

Each layer's matrix product takes a few microseconds on a GPU, less than it takes Python and
PyTorch to launch it, so a step's time is mostly launch overhead. That is the case CUDA graphs
(``torch.compile(mode="reduce-overhead")``) are for: they replay the whole step's kernels
with one launch.
"""

from __future__ import annotations

from torch import nn


def launch_bound_mlp(width: int = 1024, depth: int = 9, n_out: int = 10) -> nn.Sequential:
    """``depth`` linear layers (ReLU between them) from ``width`` inputs to ``n_out`` outputs.

    Raises:
        ValueError: ``depth`` < 2 or a size < 1.
    """
    if depth < 2 or width < 1 or n_out < 1:
        raise ValueError(f"need depth >= 2 and positive sizes, got {depth=}, {width=}, {n_out=}")
    layers: list[nn.Module] = []
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, n_out))
    return nn.Sequential(*layers)


def mlp_widths(width: int = 1024, depth: int = 9, n_out: int = 10) -> list[int]:
    """The input width then each layer's output width, for FLOP counting."""
    return [width] * depth + [n_out]
