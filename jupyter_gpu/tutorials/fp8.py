"""Notebook 02's FP8 section: when it can run, the MLP it trains, and torchao's conversion.

FP8 matrix products run on tensor cores from compute capability 8.9 (Ada) and 9.0 (Hopper) on:
torch's ``torch._scaled_mm``, which torchao's float8 training calls, refuses older GPUs
("torch._scaled_mm is only supported on CUDA devices with compute capability >= 9.0 or 8.9",
``aten/src/ATen/native/cuda/Blas.cpp``). torchao (``pip install torchao``, in the ``[tutorials]``
extra) swaps a model's ``nn.Linear`` layers for ``Float8Linear`` with
``torchao.float8.convert_to_float8_training``: each matrix product casts its inputs to float8 with
a scale per tensor ("tensorwise", the recipe torchao calls the fastest) and keeps the weights,
their gradients and the optimizer in the precision they had.
"""

from __future__ import annotations

import importlib.util
from typing import Any

FP8_CAPABILITY = (8, 9)
RECIPE = "tensorwise"


def skip_reason(emulated_without_fp8: str | None = None) -> str | None:
    """Why the FP8 section cannot run here, or ``None`` when it can.

    Args:
        emulated_without_fp8: the name of an emulated GPU that has no FP8 (a size tier that
            takes a T4's path), which rules it out on any real GPU.
    """
    import torch

    if not torch.cuda.is_available():
        return (
            "no GPU: FP8 matrix products need the tensor cores of an NVIDIA GPU of compute "
            "capability 8.9 (Ada) or 9.0 (Hopper) and later"
        )
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) < FP8_CAPABILITY:
        return (
            f"this GPU is compute capability {major}.{minor}: FP8 tensor cores start at 8.9 "
            "(Ada: L4, L40S, RTX 40) and 9.0 (Hopper: H100, H200)"
        )
    if emulated_without_fp8:
        return f"this run emulates {emulated_without_fp8}, which has no FP8 tensor cores"
    if importlib.util.find_spec("torchao") is None:
        return "torchao is not installed here: pip install torchao (the [tutorials] extra has it)"
    return None


def mlp(width: int, hidden: int, blocks: int) -> Any:
    """``blocks`` feed-forward blocks (Linear, GELU, Linear) with residual connections."""
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(width)
            self.up = nn.Linear(width, hidden, bias=False)
            self.down = nn.Linear(hidden, width, bias=False)

        def forward(self, x: Any) -> Any:
            return x + self.down(nn.functional.gelu(self.up(self.norm(x))))

    return nn.Sequential(*(Block() for _ in range(blocks)))


def to_float8(model: Any) -> Any:
    """Swap ``model``'s linear layers for torchao's ``Float8Linear`` (tensorwise scaling), in place.

    Only layers whose both dimensions divide by 16 are swapped: FP8 matrix products need that.
    """
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    def fits(module: Any, name: str) -> bool:
        return bool(module.in_features % 16 == 0 and module.out_features % 16 == 0)

    config = Float8LinearConfig.from_recipe_name(RECIPE)
    return convert_to_float8_training(model, config=config, module_filter_fn=fits)
