"""Lazy access to torch for the magics, and the timing loop they share.

Nothing here imports torch at module level: ``%load_ext jupyter_gpu`` must stay fast. Each
magic calls :func:`torch_module` when it runs.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
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
    torch = torch_module()
    count = torch.cuda.device_count()
    if device is None:
        return int(torch.cuda.current_device())
    if device >= count:
        raise UsageError(
            f"-d {device}: this kernel sees {count} CUDA device(s), numbered 0 to {count - 1}; "
            "pick one of those (CUDA_VISIBLE_DEVICES may hide others)."
        )
    return device


def synchronize() -> None:
    """Wait for queued GPU work (a no-op when CUDA is not in use), so timings are real."""
    if cuda_in_use():
        import torch

        torch.cuda.synchronize()


@dataclass(frozen=True)
class Timing:
    """Steady-state timing of one callable: the median of ``runs`` runs after warm-up.

    Times are seconds; ``times_s`` holds every measured run.
    """

    median_s: float
    runs: int
    warmup: int
    times_s: tuple[float, ...]

    def __repr__(self) -> str:
        return f"Timing(median_s={self.median_s:.6g}, runs={self.runs}, warmup={self.warmup})"

    @property
    def spread_s(self) -> float:
        """Inter-quartile range of the runs (seconds): how steady the measurement was."""
        if len(self.times_s) < 4:
            return max(self.times_s) - min(self.times_s)
        q = statistics.quantiles(self.times_s, n=4)
        return q[2] - q[0]


def time_steady(
    fn: Callable[[], Any],
    *,
    warmup: int = 3,
    target_s: float = 1.0,
    min_runs: int = 5,
    max_runs: int = 500,
    runs: int | None = None,
) -> Timing:
    """Time ``fn`` in steady state: ``warmup`` calls, then runs timed one by one.

    Every run is bracketed by CUDA synchronisation (when CUDA is in use), so asynchronous GPU
    work is counted. Without ``runs``, as many runs as fit in about ``target_s`` seconds
    (estimated from the last warm-up call), between ``min_runs`` and ``max_runs``.
    """
    last = 0.0
    for _ in range(warmup):
        synchronize()
        start = time.perf_counter()
        fn()
        synchronize()
        last = time.perf_counter() - start
    if runs is None:
        estimate = max(last, 1e-6)
        runs = int(min(max(target_s / estimate, min_runs), max_runs))
    times = []
    for _ in range(runs):
        synchronize()
        start = time.perf_counter()
        fn()
        synchronize()
        times.append(time.perf_counter() - start)
    return Timing(statistics.median(times), runs, warmup, tuple(times))


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


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes of a tensor's storage (shared by its views), 0 where there is none (meta)."""
    try:
        return int(t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):
        return 0
