"""``%amp``/``%%amp``: autocast for a cell or every cell, TF32, and ``%amp compare``."""

from .magic import AmpMagics

__all__ = ["AmpMagics"]
