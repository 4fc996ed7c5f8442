"""jupyter-gpu: a GPU monitor for JupyterLab and IPython magics for PyTorch on NVIDIA GPUs.

Importing this package is cheap: it imports neither torch nor NVML. The server extension
(``jupyter_gpu.server``) and the magics (``jupyter_gpu.magics``) are loaded on demand.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, TypeVar

from .version import __version__

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

__all__ = ["__version__", "torchrun_result"]

T = TypeVar("T")

# A library stays quiet unless the application configures logging (the server passes its own
# logger): without this, a warning of the readers (``jupyter_gpu.nvml``, ``.readings``,
# ``.sampling``...) would reach a notebook's stderr through logging.lastResort.
logging.getLogger("jupyter_gpu").addHandler(logging.NullHandler())


def torchrun_result(obj: T) -> T:
    """In a ``%%torchrun -o NAME`` cell: send ``obj`` from rank 0 back to the notebook as NAME.

    See :func:`jupyter_gpu.distributed.torchrun_result` (imported only when called).
    """
    from .distributed.result import torchrun_result as send

    return send(obj)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the prebuilt frontend extension."""
    return [{"src": "labextension", "dest": "jupyter-gpu"}]


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    """The Jupyter server extension: ``JupyterGpuApp``, which samples the GPUs and serves the API.

    Imported here, when Jupyter Server asks, so that ``import jupyter_gpu`` (e.g. by
    ``%load_ext``) loads neither jupyter_server nor tornado.
    """
    from .server.app import JupyterGpuApp

    return [{"module": "jupyter_gpu", "app": JupyterGpuApp}]


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """``%load_ext jupyter_gpu``: register the magics (torch is imported by the magics, later)."""
    from .magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: InteractiveShell) -> None:
    """``%unload_ext jupyter_gpu``: remove hooks the magics installed (e.g. ``%amp on``)."""
    from .magics import unload_ipython_extension as unload

    unload(ipython)
