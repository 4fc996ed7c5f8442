"""``%memsummary``/``%%memsummary``: who holds GPU memory, a cell's peak, freeing after an OOM."""

from .magic import MemoryMagics

__all__ = ["MemoryMagics"]
