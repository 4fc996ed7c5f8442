"""The package's import contract: cheap to import, one version, entry points in place."""

import json
import subprocess
import sys
from pathlib import Path

import jupyter_gpu

ROOT = Path(__file__).resolve().parents[2]


HEAVY = ("torch", "pynvml", "tornado", "jupyter_server")


def imported_after(statements: str) -> list[str]:
    """Which of ``HEAVY`` a fresh interpreter has imported after running ``statements``."""
    code = f"import sys; {statements}; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout.strip().replace("'", '"')))


def test_import_loads_neither_torch_nor_nvml_nor_the_server() -> None:
    assert imported_after("import jupyter_gpu, jupyter_gpu.sampling, jupyter_gpu.server") == []


def test_the_server_extension_never_loads_torch_or_nvml() -> None:
    loaded = imported_after("import jupyter_gpu; jupyter_gpu._jupyter_server_extension_points()")
    assert loaded == ["jupyter_server", "tornado"]  # the app class, imported when asked for


def test_version_comes_from_package_json() -> None:
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
