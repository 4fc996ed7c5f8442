"""Notebook 02's second step: a small classifier fed raw, unnormalised features.

Tabular data often arrives in its own units (counts, prices, populations), and a first layer
multiplies them as they are. Under fp16 autocast the linear layer's input is cast to fp16 first,
whose largest value is 65,504 (``torch.finfo(torch.float16).max``): a feature of 200,000 becomes
``inf`` there, and the loss ``nan``. bf16 has fp32's exponent range and keeps it. The layer norm
after the first layer brings the activations back to unit scale, so that fp32 and bf16 train the
same network. Exercise 2.1 uses this step's ``%amp compare`` figures beside the GPT's: where the
hardware computes fp16, the measurements can still rule it out.
"""

from __future__ import annotations

import torch
from torch import nn

RAW_SCALE = 200_000.0
"""How large the raw columns are (a population, a price in cents): above fp16's 65,504."""
RAW_COLUMNS = 4
"""How many of the features come in raw units; the others are already standardised."""


def raw_features(
    rows: int, features: int, classes: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of ``rows`` examples (on the CPU) and their labels.

    The first :data:`RAW_COLUMNS` features are positive and up to a few times
    :data:`RAW_SCALE`; the labels are a fixed random linear rule of the *standardised* features,
    so that a network can learn them once it normalises its input.

    Raises:
        ValueError: ``features`` not above :data:`RAW_COLUMNS`, or ``rows`` or ``classes`` < 1.
    """
    if features <= RAW_COLUMNS or rows < 1 or classes < 1:
        raise ValueError(
            f"need rows, classes >= 1 and more than {RAW_COLUMNS} features, got "
            f"{rows=}, {features=}, {classes=}"
        )
    standard = torch.randn(rows, features, generator=generator)
    rule = torch.randn(features, classes, generator=generator)
    labels = (standard @ rule).argmax(dim=1)
    x = standard.clone()
    x[:, :RAW_COLUMNS] = (standard[:, :RAW_COLUMNS].abs() + 0.1) * RAW_SCALE
    return x, labels


def tabular_net(features: int, classes: int, width: int = 256) -> nn.Module:
    """Linear, LayerNorm, ReLU, Linear, ReLU, Linear: a small classifier for raw features."""
    return nn.Sequential(
        nn.Linear(features, width),
        nn.LayerNorm(width),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, classes),
    )
