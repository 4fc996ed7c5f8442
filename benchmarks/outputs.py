"""Where a GPU run writes what it measured: one rule for ``benchmarks/`` and ``tests/gpu``.

``$JUPYTER_GPU_OUT`` first: ``tests/gpu/session.sh`` points it at the folder its archive packs.
Else ``$OUT``: the device machine's folder that comes back, for a script run by hand. Else
nowhere (a plain CPU run writes nothing), unless a path is given (a benchmark's ``--json``).

The order matters. A check that wrote to ``$OUT`` while ``session.sh`` ran it put its file beside
the archive instead of inside it, and when the part ran in the background (``session.sh start``)
that file was lost unless it ended in ``.log``: ``collect`` copies back only the archive and the
logs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def out_dir() -> Path | None:
    """The folder for this run's outputs (created), or ``None`` when none is set."""
    folder = os.environ.get("JUPYTER_GPU_OUT") or os.environ.get("OUT")
    if not folder:
        return None
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_text(name: str, text: str, *, path: Path | None = None) -> Path | None:
    """Write ``text`` to ``path``, else to ``name`` in :func:`out_dir`; where, or ``None``."""
    if path is None:
        folder = out_dir()
        if folder is None:
            return None
        path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_json(name: str, data: Any, *, indent: int = 2, path: Path | None = None) -> Path | None:
    """:func:`write_text` of ``data`` as JSON (what JSON cannot hold, as its str)."""
    return write_text(name, json.dumps(data, indent=indent, default=str) + "\n", path=path)
