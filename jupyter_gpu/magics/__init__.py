"""IPython magics for PyTorch on GPUs, registered by ``%load_ext jupyter_gpu``.

``%compile``, ``%amp``/``%%amp``, ``%memsummary``/``%%memsummary``, ``%%profile`` and ``%gpu``
(see docs/magics.md). Loading them imports neither torch nor plotly: each magic imports torch
when it runs. Unloading removes the magics and every hook they installed.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from .amp import AmpMagics
from .compile import CompileMagics
from .gpu import GpuMagics
from .memory import MemoryMagics
from .profile import ProfileMagics

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.magic import Magics

__all__ = [
    "AmpMagics",
    "CompileMagics",
    "GpuMagics",
    "MemoryMagics",
    "ProfileMagics",
    "load_ipython_extension",
    "unload_ipython_extension",
]

MAGIC_CLASSES: tuple[type[Magics], ...] = (
    AmpMagics,
    CompileMagics,
    GpuMagics,
    MemoryMagics,
    ProfileMagics,
)


class _Loaded:
    """What one shell got from us: the magics instances and the magics they replaced."""

    def __init__(self) -> None:
        self.instances: list[Magics] = []
        self.replaced: dict[tuple[str, str], Any] = {}


_loaded: weakref.WeakKeyDictionary[InteractiveShell, _Loaded] = weakref.WeakKeyDictionary()


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """Register the magics on ``ipython`` (torch is imported by the magics, later)."""
    if ipython in _loaded:
        return
    record = _Loaded()
    table = ipython.magics_manager.magics
    for cls in MAGIC_CLASSES:
        instance = cls(ipython)
        for kind, names in instance.magics.items():
            for name in names:
                if name in table[kind]:
                    record.replaced[(kind, name)] = table[kind][name]
        ipython.register_magics(instance)
        record.instances.append(instance)
    _loaded[ipython] = record


def unload_ipython_extension(ipython: InteractiveShell) -> None:
    """Remove the hooks (``%amp on``, the ``%compile`` reporter) and the magics themselves."""
    record = _loaded.pop(ipython, None)
    if record is None:
        return
    table = ipython.magics_manager.magics
    for instance in record.instances:
        unload = getattr(instance, "unload", None)
        if unload is not None:
            unload()
        for kind, names in instance.magics.items():
            for name in names:
                table[kind].pop(name, None)
                if (kind, name) in record.replaced:
                    table[kind][name] = record.replaced[(kind, name)]
        ipython.magics_manager.registry.pop(type(instance).__name__, None)


def loaded_magics(ipython: InteractiveShell, cls: type[Magics]) -> Magics | None:
    """The instance of ``cls`` registered on ``ipython`` by this extension (for tests, hooks)."""
    record = _loaded.get(ipython)
    if record is None:
        return None
    return next((m for m in record.instances if isinstance(m, cls)), None)
