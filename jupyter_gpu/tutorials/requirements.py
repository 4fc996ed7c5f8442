"""The first cell of every notebook: are the packages it needs installed? If not, what to run.

Only the standard library is imported here, so the check works in a kernel that lacks torch or
NumPy and says so in one sentence instead of a traceback from deep inside a later cell.
"""

from __future__ import annotations

import importlib.util
import sys

from jupyter_gpu.tutorials.install_hint import install_hint

# import name -> what pip installs it as (and the extra that brings it)
_PIP_NAMES = {
    "torch": "torch",
    "numpy": "numpy",
    "sklearn": "scikit-learn",
    "IPython": "ipython",
    "jupyter_gpu": "jupyter-gpu",
}


class MissingRequirementsError(ImportError):
    """Packages a notebook needs are missing; the message says what to install."""


def missing_modules(*modules: str) -> list[str]:
    """The ``modules`` (import names) that cannot be imported in this kernel."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def check_requirements(*modules: str) -> str:
    """Check that ``modules`` import; return a one-line summary of what was found.

    Raises:
        MissingRequirementsError: some are missing; the message names the pip command for
            the way jupyter-gpu was installed here (``install_hint``), and says that torch
            should be installed first with the build for this machine.
    """
    missing = missing_modules(*modules)
    if missing:
        names = ", ".join(_PIP_NAMES.get(m, m) for m in missing)
        torch_note = (
            " Install torch first, the build for your machine (https://pytorch.org/get-started/"
            "locally/: a CUDA build for an NVIDIA GPU), then the command above."
            if "torch" in missing
            else ""
        )
        command, note = install_hint("tutorials")
        raise MissingRequirementsError(
            f"this notebook needs {names}, which this kernel ({sys.executable}) cannot import. "
            f"Run `%{command}` in a cell (it installs into this kernel's environment), then "
            f"restart the kernel.{' ' + note if note else ''}{torch_note}"
        )
    versions = []
    for module in modules:
        mod = sys.modules.get(module)
        version = getattr(mod, "__version__", None) if mod else None
        versions.append(f"{module} {version}" if version else module)
    return "all found: " + ", ".join(versions)
