"""``%%torchrun``: run a cell on several GPUs or machines with torchrun (docs/distributed.md)."""

from .magic import TorchrunMagics

__all__ = ["TorchrunMagics"]
