"""``%%profile``: torch.profiler over a cell, its op table, GPU idle time and hints."""

from .magic import ProfileMagics
from .results import ProfileResult

__all__ = ["ProfileMagics", "ProfileResult"]
