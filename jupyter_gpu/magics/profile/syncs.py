"""Where the cell synchronised with the GPU, recorded while it runs (without ``--stack``).

The profile counts the syncs exactly (their CUDA runtime calls) but, without Python stacks,
cannot say which line made them. Recording stacks for every call costs the whole cell, so
while the cell runs this records the Python stack of the syncs alone:

- torch's sync debug mode (``torch.cuda.set_sync_debug_mode("warn")``) warns at each implicit
  sync (``.item()``, ``.cpu()``, ``print`` of a CUDA tensor, ``stream.synchronize()``); the
  warning is caught here, where the stack is still the caller's, and never shown;
- an explicit ``torch.cuda.synchronize()`` does not warn, so ``torch.cuda.synchronize`` is
  wrapped for the cell (a name imported before with ``from torch.cuda import synchronize``
  escapes: its syncs are counted, not placed).

Both are put back when the cell ends, whatever it did.
"""

from __future__ import annotations

import re
import sys
import warnings
from collections import Counter
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from jupyter_gpu.magics.common.origin import is_library_file

from .analysis import place

_SYNC_WARNING = re.compile(r"called a synchronizing CUDA operation")
_OURS = str(Path(__file__).resolve().parents[2])  # jupyter_gpu/


def user_place(frame: FrameType | None, cell_names: dict[str, int]) -> str:
    """The innermost frame of user code at or above ``frame`` ("cell [3] line 4 in step")."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename in cell_names or not (
            is_library_file(filename) or filename.startswith((_OURS, "<"))
        ):
            return place(filename, frame.f_lineno, frame.f_code.co_name, cell_names)
        frame = frame.f_back
    return ""


class SyncSpy:
    """Context manager: count the places of the device syncs made inside it (CUDA only)."""

    def __init__(self, torch: Any, cell_names: dict[str, int]) -> None:
        self.torch = torch
        self.cell_names = cell_names
        self.places: Counter[str] = Counter()
        self._catch: Any = None
        self._mode: int | None = None
        self._synchronize: Any = None
        self._in_explicit = False
        self._show: Any = None

    def __enter__(self) -> SyncSpy:
        cuda = self.torch.cuda
        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.filterwarnings("always", message=_SYNC_WARNING.pattern, category=UserWarning)
        # torch warns that the mode is a prototype each time it is set: ours to know, not the
        # user's (the count comes from the profile; the mode only places the syncs)
        warnings.filterwarnings("ignore", message="Synchronization debug mode is a prototype")
        self._show = warnings.showwarning
        warnings.showwarning = self._showwarning
        self._mode = int(cuda.get_sync_debug_mode())
        cuda.set_sync_debug_mode(1)  # "warn"
        self._synchronize = cuda.synchronize
        spy = self

        def synchronize(device: Any = None) -> None:
            spy.places[user_place(sys._getframe(1), spy.cell_names) or "?"] += 1
            spy._in_explicit = True
            try:
                spy._synchronize(device)
            finally:
                spy._in_explicit = False

        synchronize.__doc__ = cuda.synchronize.__doc__
        synchronize.__wrapped__ = cuda.synchronize  # type: ignore[attr-defined]  # functools' name
        cuda.synchronize = synchronize
        return self

    def _showwarning(self, message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
        if _SYNC_WARNING.search(str(message)):
            if not self._in_explicit:
                self.places[user_place(sys._getframe(1), self.cell_names) or "?"] += 1
            return
        self._show(message, category, *args, **kwargs)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        cuda = self.torch.cuda
        cuda.synchronize = self._synchronize
        if self._mode is not None:
            cuda.set_sync_debug_mode(self._mode)
        self._catch.__exit__(exc_type, exc, tb)
        self.places.pop("?", None)  # counted by the profile; no line to show
