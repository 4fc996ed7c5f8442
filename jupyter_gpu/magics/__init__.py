"""IPython magics for PyTorch on GPUs, registered by ``%load_ext jupyter_gpu``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """Register the magics (placeholder until the magics land)."""


def unload_ipython_extension(ipython: InteractiveShell) -> None:
    """Remove what ``load_ipython_extension`` installed."""
