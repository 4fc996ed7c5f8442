"""Where a GPU check writes what it measured: one rule for every file in ``tests/gpu``.

``$JUPYTER_GPU_OUT`` first: ``session.sh`` points it at the folder its archive packs. Else
``$OUT``: the device machine's folder that comes back, for a check run by hand. Else nowhere
(a plain CPU run of the suite writes nothing).

The order matters. A check that wrote to ``$OUT`` while ``session.sh`` ran it put its file beside
the archive instead of inside it, and when the part ran in the background (``session.sh start``)
that file was lost: ``collect`` copies back only the archive and the logs.
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


def write_text(name: str, text: str) -> Path | None:
    """Write ``text`` to ``name`` in :func:`out_dir`; the path, or ``None`` when none is set."""
    folder = out_dir()
    if folder is None:
        return None
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def write_json(name: str, data: Any, indent: int = 2) -> Path | None:
    """Write ``data`` as JSON to ``name`` in :func:`out_dir` (what JSON cannot hold, as its str)."""
    return write_text(name, json.dumps(data, indent=indent, default=str) + "\n")
