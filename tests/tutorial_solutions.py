"""The notebooks' exercise solutions that more than one test runs (on the CPU and on the GPU)."""

from __future__ import annotations

import torch

from jupyter_gpu.tutorials.checks_06 import WarmupScale


class WarmupScaleTensor(WarmupScale):
    """Notebook 06's solution: the step in a buffer, so its value is data, not a guard."""

    def __init__(self, width: int, warmup: int = 10) -> None:
        super().__init__(width, warmup)
        del self.step
        self.register_buffer("step", torch.tensor(0), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * torch.clamp(self.step / self.warmup, max=1.0)


class Standardize(torch.nn.Module):
    """Notebook 01's exercise 8.1 original: a Python float decides, so Dynamo breaks the graph."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        std = float(x.std())
        if std > 1e-3:
            return (x - x.mean()) / std
        return x - x.mean()


class StandardizeSafeWhere(torch.nn.Module):
    """Notebook 01's solution: torch.where, dividing by a std made safe where it is not used."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        std = x.std()
        centred = x - x.mean()
        divides = std > 1e-3
        return torch.where(
            divides, centred / torch.where(divides, std, torch.ones_like(std)), centred
        )


class StandardizePlainWhere(torch.nn.Module):
    """Notebook 01's old solution: the right results, and a NaN gradient on a constant input."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        std = x.std()
        centred = x - x.mean()
        return torch.where(std > 1e-3, centred / std, centred)
