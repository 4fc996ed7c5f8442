"""Whose code a file holds: a library's, or the user's (notebook cells, their own modules).

Libraries are torch, installed packages and the standard library. The profiler's frames, the
sync tracer and the reach of a repeated expression (``replay/reach.py``) all ask it the same
way. Profiler paths can be relative (``torch/nn/...``).
"""

from __future__ import annotations

import sysconfig

_LIBRARY = (
    "/torch/",
    "\\torch\\",
    "site-packages",
    "dist-packages",
    "/IPython/",
    "/ipykernel/",
    "<frozen",
    "<built-in",
)
_LIBRARY_START = ("torch/", "torch\\", "<built-in")
#: Python's standard library (``warnings.py`` sits between torch's sync warning and the cell).
_STDLIB = tuple({sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib")})


def is_library_file(filename: str) -> bool:
    """True for the frames of torch, other installed packages and the standard library."""
    return (
        filename.startswith(_LIBRARY_START)
        or filename.startswith(_STDLIB)
        or any(m in filename for m in _LIBRARY)
    )
