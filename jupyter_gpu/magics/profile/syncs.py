"""The device synchronisations of the measured steps, and the pass that finds their lines.

**Counting** is exact and comes from the profile: a synchronisation is a CUDA runtime or driver
call that blocks the host until the device is done (``cudaStreamSynchronize``,
``cudaDeviceSynchronize``, ``cudaEventSynchronize``, a blocking ``cudaMemcpy``). ``.item()`` on a
CUDA tensor is one (a copy, then a stream sync), and so is a blocking ``.to('cuda')`` of pageable
memory; ``.item()`` on a CPU tensor has no runtime call at all, so it is not. Only the syncs
inside the measured steps count, and their durations add up to the time the host was blocked.

**Placing** them (which line made them) is its own pass, the *sync pass*: one more run of the
code with the profiler off, never while the GPU is timed, because what places them costs host
time right after each sync, when the GPU's queue is empty, and would read as GPU idle time:

- torch's sync debug mode (``torch.cuda.set_sync_debug_mode("warn")``) warns at each implicit
  sync (``.item()``, ``.cpu()``, ``print`` of a CUDA tensor, ``stream.synchronize()``); the
  warning is caught here, where the stack is still the caller's, and never shown;
- an explicit ``torch.cuda.synchronize()`` does not warn, so ``torch.cuda.synchronize`` is
  wrapped for the pass (a name imported before with ``from torch.cuda import synchronize``
  escapes: its syncs are counted, not placed).

Both are put back when the pass ends, whatever it did. With ``--stack`` the profile's own Python
stacks place them instead, and there is no sync pass.
"""

from __future__ import annotations

import re
import sys
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from jupyter_gpu.magics.shell.origin import is_library_file

from .places import place

#: Runtime and driver calls that block the host until the device is done (CUDA 12 and 13
#: also have ``_ptsz``/``_v2`` variants, matched by prefix).
SYNC_CALLS = (
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
    "cuStreamSynchronize",
    "cuCtxSynchronize",
    "cuEventSynchronize",
)
#: Blocking copies (the ``Async`` ones do not block by themselves).
_BLOCKING_COPIES = ("cudaMemcpy", "cudaMemcpy_ptds", "cuMemcpyDtoH", "cuMemcpyDtoH_v2")


def is_sync(name: str) -> bool:
    """A runtime or driver call that blocks the host until the device is done."""
    return name.startswith(SYNC_CALLS) or name in _BLOCKING_COPIES


@dataclass
class Syncs:
    """The measured steps' device syncs: each call's count, the time blocked, and their lines.

    ``places`` (line -> count) come from the sync pass (one run of the code) or, with
    ``--stack``, from the same profiled steps (``places_from``: ``"pass"``, ``"stack"``, ``""``).
    """

    by_call: Counter[str] = field(default_factory=Counter)
    places: Counter[str] = field(default_factory=Counter)
    #: Seconds the host spent inside the sync calls, over the measured steps.
    blocked_s: float = 0.0
    #: Measured steps the counts cover.
    steps: int = 1
    places_from: str = ""

    @property
    def count(self) -> int:
        return sum(self.by_call.values())

    def describe(self) -> str:
        """``12 device syncs (cudaStreamSynchronize x12) at cell [3] line 4 (x12)``."""
        calls = ", ".join(f"{name} x{n}" for name, n in self.by_call.most_common())
        per_step = f"; {self.count / self.steps:.3g} a step" if self.steps > 1 else ""
        text = f"{self.count:,} device sync(s) ({calls}{per_step})"
        if self.places:
            where = "; ".join(f"{p} (x{n})" for p, n in self.places.most_common(3))
            more = len(self.places) - 3
            text += f" at {where}" + (f" and {more} more place(s)" if more > 0 else "")
            # The pass runs the code once: one step's worth of syncs, where steps repeat the code.
            expected = self.count if self.places_from == "stack" else self.count / self.steps
            missing = round(expected - sum(self.places.values()))
            if missing > 0:
                text += f"; {missing} not traced to a line"
        return text


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
    """Context manager: count the places of the device syncs made inside it (the sync pass)."""

    def __init__(self, cell_names: dict[str, int]) -> None:
        self.cell_names = cell_names
        self.places: Counter[str] = Counter()
        self._catch: Any = None
        self._mode: int | None = None
        self._synchronize: Any = None
        self._in_explicit = False
        self._show: Any = None

    def __enter__(self) -> SyncSpy:
        import torch  # loaded already: the magic imported it

        cuda = torch.cuda
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
        import torch  # loaded already: the magic imported it

        cuda = torch.cuda
        cuda.synchronize = self._synchronize
        if self._mode is not None:
            cuda.set_sync_debug_mode(self._mode)
        self._catch.__exit__(exc_type, exc, tb)
        self.places.pop("?", None)  # counted by the profile; no line to show
