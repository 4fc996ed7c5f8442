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

#: The folders that runs of this project's tools have left in files: a development checkout, the
#: GPU runner's scratch folder, the GPU machine's torch.
LOCAL = re.compile(r"/work/main\b|/tmp/notebooks-gpu-|/opt/torch/")
#: The tests that hold such paths as their data.
DATA = {"tests/unit/test_no_local_paths.py", "tests/unit/tutorials/test_notebook_runner_paths.py"}


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
        if name in DATA or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue  # a binary file (an image)
        for number, line in enumerate(data.decode(errors="replace").splitlines(), 1):
            match = LOCAL.search(line)
            if match:
                found.append(f"{name}:{number}: {match.group(0)}")
    assert not found, "\n".join(found[:20])
