"""A lean install: the monitor's dependencies pull neither torch nor JupyterLab.

``pip install jupyter-gpu`` is what a hub image puts in the server's environment: the server
extension, the magics' code and the prebuilt labextension. torch is the ``[torch]`` extra (and
part of ``[tutorials]``), JupyterLab (with ipykernel) the ``[lab]`` extra. Without torch the
magics say how to get it, as a ``UsageError``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]


def names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_base_install_pulls_no_torch_and_no_jupyterlab() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = names(project["dependencies"])
    assert {"torch", "jupyterlab", "ipykernel"}.isdisjoint(base), base
    assert {"jupyter_server", "nvidia-ml-py", "psutil", "ipython", "ipywidgets"} <= base
    extras = {k: names(v) for k, v in project["optional-dependencies"].items()}
    assert "torch" in extras["torch"]
    assert {"torch", "numpy", "scikit-learn"} <= extras["tutorials"]
    assert "jupyterlab" in extras["lab"]


def test_a_magic_without_torch_says_how_to_get_it() -> None:
    # A fresh interpreter where `import torch` fails, as in an environment without it.
    code = """
import sys
sys.modules["torch"] = None  # import torch -> ImportError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.error import UsageError
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "jupyter_gpu")
result = ip.run_cell("%%amp\\nz = 1")
error = result.error_in_exec or result.error_before_exec
assert isinstance(error, UsageError), repr(error)
assert "needs PyTorch" in str(error), str(error)
assert "z" not in ip.user_ns
print("ok")
"""
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert run.stdout.strip().endswith("ok")
