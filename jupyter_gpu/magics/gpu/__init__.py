"""``%gpu``: the GPUs at a glance, their interconnect (--topology) and a live view (--watch)."""

from .magic import GpuMagics

__all__ = ["GpuMagics"]
