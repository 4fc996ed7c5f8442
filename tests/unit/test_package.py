"""The package's import contract: cheap to import, one version, entry points in place."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import jupyter_gpu

ROOT = Path(__file__).resolve().parents[2]


HEAVY = ("torch", "pynvml", "tornado", "jupyter_server")
IMPORTS = """
import json, sys
def loaded():
    return sorted(m for m in HEAVY if m in sys.modules)
import jupyter_gpu, jupyter_gpu.sampling, jupyter_gpu.server
first = loaded()
jupyter_gpu._jupyter_server_extension_points()  # what Jupyter Server calls to load it
print(json.dumps([first, loaded()]))
"""


@pytest.mark.slow
def test_imports_stay_cheap() -> None:
    code = f"HEAVY = {HEAVY!r}\n{IMPORTS}"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    package, extension = json.loads(out.stdout)
    assert package == []  # neither torch, NVML, nor the server for `import jupyter_gpu`
    # the server extension's class brings the server, never torch or NVML
    assert extension == ["jupyter_server", "tornado"]


def test_version_comes_from_package_json() -> None:
    if not (ROOT / "jupyter_gpu" / "_version.py").exists():  # written by the build (pip install)
        assert jupyter_gpu.__version__ == "0.0.0+unknown"
        pytest.skip("a source tree that was never built or installed has no version")
    package = json.loads((ROOT / "package.json").read_text())
    assert jupyter_gpu.__version__ == package["version"]


def test_extension_entry_points() -> None:
    assert jupyter_gpu._jupyter_labextension_paths() == [
        {"src": "labextension", "dest": "jupyter-gpu"}
    ]
    from jupyter_server.extension.application import ExtensionApp

    from jupyter_gpu.server.app import JupyterGpuApp

    (point,) = jupyter_gpu._jupyter_server_extension_points()
    assert point == {"module": "jupyter_gpu", "app": JupyterGpuApp}
    assert issubclass(JupyterGpuApp, ExtensionApp)
    assert JupyterGpuApp.name == "jupyter_gpu"
