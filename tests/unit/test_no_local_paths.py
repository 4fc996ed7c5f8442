"""No committed file names a folder of the machine that wrote it.

The executed notebooks in ``benchmarks/h200-notebooks/`` came from the GPU machine, with its
scratch folder, its checkout and its Python in tracebacks and logs; ``run_notebooks_gpu.py``
writes them as ``$RUN/``, ``./``, ``$TMPDIR/`` and ``$PYTHON/`` now. This keeps it so.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.helpers import ROOT

#: What a machine's own folders look like in a file: this repository's files by an absolute path
#: (a checkout's folder, then ``jupyter_gpu``, ``notebooks`` or ``benchmarks``, where the
#: relative ``./jupyter_gpu`` is meant), and the GPU notebook runner's scratch folder (made by
#: ``tempfile.mkdtemp`` with the prefix ``notebooks-gpu-``).
LOCAL = re.compile(
    r"(?<![\w.$~/-])/[\w.-]+(?:/[\w.-]+)*/(?:jupyter_gpu|notebooks|benchmarks)/"
    r"|/notebooks-gpu-\w"
)


def tracked_files() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout (the files git tracks)")
    listing = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    return [name for name in listing.decode().split("\0") if name]


def test_no_tracked_file_names_a_local_folder() -> None:
    found = []
    for name in tracked_files():
        path = ROOT / name
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue  # a binary file (an image)
        for number, line in enumerate(data.decode(errors="replace").splitlines(), 1):
            match = LOCAL.search(line)
            if match:
                found.append(f"{name}:{number}: {match.group(0)}")
    assert not found, "\n".join(found[:20])
