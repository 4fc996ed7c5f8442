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
