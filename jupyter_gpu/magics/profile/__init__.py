"""``%%profile``: torch.profiler over a cell, its op table, GPU idle time and hints."""

from .magic import ProfileMagics, ProfileResult

__all__ = ["ProfileMagics", "ProfileResult"]
