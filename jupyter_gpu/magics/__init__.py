"""IPython magics for PyTorch on GPUs, registered by ``%load_ext jupyter_gpu``.

``%compile``, ``%amp``/``%%amp``, ``%memsummary``/``%%memsummary``, ``%profile``/``%%profile``,
``%gpu``, ``%%torchrun`` and ``%tune`` (see docs/magics.md). Loading them imports neither torch nor
plotly: each magic imports torch when it runs. Unloading removes the magics and every hook they
installed. While loaded, an exit hook resets torch.compile's caches before IPython clears the
namespace at exit, and torch's warnings show as one short note each (``shell/quiet.py``).
"""

from __future__ import annotations

import atexit
import contextlib
import sys
import weakref
from typing import TYPE_CHECKING, Any

from .amp import AmpMagics
from .compile import CompileMagics
from .gpu import GpuMagics
from .memory import MemoryMagics
from .profile import ProfileMagics
from .shell.quiet import ACTIVE as QUIET_ACTIVE
from .shell.quiet import Quiet
from .torchrun import TorchrunMagics
from .tune import TuneMagics

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.magic import Magics

__all__ = [
    "AmpMagics",
    "CompileMagics",
    "GpuMagics",
    "MemoryMagics",
    "ProfileMagics",
    "TorchrunMagics",
    "TuneMagics",
    "load_ipython_extension",
    "unload_ipython_extension",
]

MAGIC_CLASSES: tuple[type[Magics], ...] = (
    AmpMagics,
    CompileMagics,
    GpuMagics,
    MemoryMagics,
    ProfileMagics,
    TorchrunMagics,
    TuneMagics,
)


class _Loaded:
    """What one shell got from us: the magics instances and the magics they replaced."""

    def __init__(self) -> None:
        self.instances: list[Magics] = []
        self.replaced: dict[tuple[str, str], Any] = {}
        self.quiet: Quiet | None = None


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
    # torch's warnings become one short note each (shell/quiet.py)
    record.quiet = Quiet(ipython)
    record.quiet.install()
    QUIET_ACTIVE.append(record.quiet)
    _loaded[ipython] = record
    # atexit runs the last registered first: this runs before the shell's own exit hook.
    atexit.unregister(_reset_dynamo_at_exit)
    atexit.register(_reset_dynamo_at_exit)


def _reset_dynamo_at_exit() -> None:
    """Drop torch.compile's caches while the shell's namespace is still whole.

    Dynamo puts names (``__builtins_dict___0``, ``__compiled_fn_1``) in the globals of the code
    it compiles, a cell's namespace, and deletes them when that code is freed. IPython's exit
    hook empties the namespace first, so at exit each deletion printed "Exception ignored ...
    KeyError: '__builtins_dict___0'" (plain torch.compile in IPython does it too).
    """
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None:  # nothing was compiled: leave torch alone
        return
    with contextlib.suppress(Exception):  # the process is ending: nothing to report to
        dynamo.reset()
    # reset() frees the compiled code of most frames, but code compiled around a graph break
    # (or for a recompile) stays alive with the user's function until the namespace is emptied,
    # and its cleanup then deletes names already gone. torch keeps these cleanups in
    # CleanupManager: a weakref per compiled code object, whose callback runs them. Dropping the
    # weakrefs drops the callbacks; the names go with the namespace, as every other name does.
    manager = getattr(sys.modules.get("torch._dynamo.utils"), "CleanupManager", None)
    if manager is not None:
        with contextlib.suppress(Exception):  # torch's internals moved: leave them alone
            manager.instance.refs.clear()
            manager.instance.values.clear()


def unload_ipython_extension(ipython: InteractiveShell) -> None:
    """Remove the hooks (``%amp on``, the ``%compile`` reporter) and the magics themselves."""
    record = _loaded.pop(ipython, None)
    if record is None:
        return
    if record.quiet is not None:
        record.quiet.uninstall()
        if record.quiet in QUIET_ACTIVE:
            QUIET_ACTIVE.remove(record.quiet)
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
    if not _loaded:
        atexit.unregister(_reset_dynamo_at_exit)


def loaded_magics(ipython: InteractiveShell, cls: type[Magics]) -> Magics | None:
    """The instance of ``cls`` registered on ``ipython`` by this extension (for tests, hooks)."""
    record = _loaded.get(ipython)
    if record is None:
        return None
    return next((m for m in record.instances if isinstance(m, cls)), None)
