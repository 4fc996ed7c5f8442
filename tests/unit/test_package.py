"""The package's import contract: cheap to import, one version, entry points in place."""

import json
import subprocess
import sys
from pathlib import Path

import jupyter_gpu

ROOT = Path(__file__).resolve().parents[2]


def test_import_loads_neither_torch_nor_nvml() -> None:
    code = (
        "import sys, jupyter_gpu, jupyter_gpu.sampling, jupyter_gpu.server;"
        "print(sorted(m for m in ('torch', 'pynvml') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_version_comes_from_package_json() -> None:
    package = json.loads((ROOT / "package.json").read_text())
    assert jupyter_gpu.__version__ == package["version"]


def test_extension_entry_points() -> None:
    assert jupyter_gpu._jupyter_labextension_paths() == [
        {"src": "labextension", "dest": "jupyter-gpu"}
    ]
    assert jupyter_gpu._jupyter_server_extension_points() == [{"module": "jupyter_gpu"}]
