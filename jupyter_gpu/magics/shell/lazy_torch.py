"""Lazy access to torch for the magics (timing is in ``jupyter_gpu.measure``).

Nothing here imports torch at module level: ``%load_ext jupyter_gpu`` must stay fast. Each
magic calls :func:`torch_module` when it runs.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

if TYPE_CHECKING:
    import torch


def torch_module() -> ModuleType:
    """Import torch (first use in this kernel) or raise a ``UsageError`` that says how to get it."""
    try:
        import torch
    except ImportError as exc:
        raise UsageError(
            "This magic needs PyTorch, which is not installed in this kernel's environment: "
            "install a build for your machine (https://pytorch.org/get-started/locally/)."
        ) from exc
    return torch


def torch_if_imported() -> ModuleType | None:
    """The torch module if this kernel already imported it, else ``None`` (never imports)."""
    return sys.modules.get("torch")


def cuda_in_use() -> bool:
    """True when this kernel has already initialised CUDA through torch (never initialises it)."""
    torch = torch_if_imported()
    return bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized())


def cuda_device_index(device: int | None) -> int:
    """Validate a CUDA device index given with ``-d`` (``None``: the current device).

    Raises:
        UsageError: no such device.
    """
    torch_module()  # the UsageError that says how to install torch, where it is missing
    import torch

    count = torch.cuda.device_count()
    if device is None:
        return int(torch.cuda.current_device())
    if device >= count:
        raise UsageError(
            f"-d {device}: this kernel sees {count} CUDA device(s), numbered 0 to {count - 1}; "
            "pick one of those (CUDA_VISIBLE_DEVICES may hide others)."
        )
    return device


def loss_value(value: Any) -> float | None:
    """A step's return value as a float loss (a 1-element tensor or a number), else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    torch = torch_if_imported()
    if torch is not None and isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.detach().float().item())
    return None


def describe_device(device: str) -> str:
    """``"cuda: NVIDIA H200"`` or ``"cpu"``, for report headers."""
    if device.startswith("cuda"):
        import torch

        return f"cuda: {torch.cuda.get_device_name()}"
    return device


def holds_no_memory(t: Any) -> bool:
    """A meta tensor or a FakeTensor (torch.compile's stand-in): shapes only, no storage.

    Inspecting a FakeTensor's storage makes torch warn ("Accessing the data pointer of
    FakeTensor is deprecated"), so the memory magics skip them before touching it.
    """
    if getattr(t, "is_meta", False):
        return True
    fake = sys.modules.get("torch._subclasses.fake_tensor")
    return fake is not None and isinstance(t, fake.FakeTensor)


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes of a tensor's storage (shared by its views), 0 where there is none (meta)."""
    try:
        return int(t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):
        return 0
