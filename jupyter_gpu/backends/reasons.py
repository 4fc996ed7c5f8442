"""Why there is no GPU, in plain words, and the backend a kernel of this server should use.

NVML's reasons ("NVML Shared Library Not Found") are exact but cryptic to a student: every view
that says "No GPU" also says what it means and where to see the monitor without a GPU.

A server whose backend is ``simulated`` sets ``JUPYTER_GPU_BACKEND=simulated``,
``JUPYTER_GPU_SIMULATED_DEVICES`` and ``JUPYTER_GPU_SIMULATED_EPOCH`` in its environment, which
the kernels it starts inherit, so ``%gpu`` in those kernels shows the same simulated GPUs as the
sidebar, at the same point of their made-up jobs, instead of "No GPU".
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

BACKEND_ENV = "JUPYTER_GPU_BACKEND"
"""The backend ``%gpu`` and ``%gpu --watch`` use by default (``auto`` when unset)."""
SIMULATED_DEVICES_ENV = "JUPYTER_GPU_SIMULATED_DEVICES"
"""How many simulated GPUs, when ``JUPYTER_GPU_BACKEND`` is ``simulated``."""
SIMULATED_EPOCH_ENV = "JUPYTER_GPU_SIMULATED_EPOCH"
"""When (Unix seconds) the server's simulated jobs started: its kernels' backends start there."""

SIMULATED_DEMO = (
    "To see the monitor without a GPU, start JupyterLab with "
    "--JupyterGpu.backend=simulated: it shows labelled, simulated GPUs."
)

_PLAIN: tuple[tuple[str, str], ...] = (
    (
        "NVML Shared Library Not Found",
        "This machine has no NVIDIA driver (its library libnvidia-ml.so.1 is not installed), "
        "so there is no NVIDIA GPU to use here.",
    ),
    (
        "NVIDIA driver is not loaded",
        "The NVIDIA driver is installed but not running (load the nvidia kernel module, or "
        "reboot).",
    ),
    ("No NVIDIA GPU found", "The NVIDIA driver is there but found no GPU on this machine."),
    (
        "nvidia-ml-py is not installed",
        "The nvidia-ml-py package is missing (pip install nvidia-ml-py), so the GPUs cannot be "
        "read.",
    ),
    (
        "No permission to use NVML",
        "This user may not read the GPUs through the NVIDIA driver (ask the administrator).",
    ),
    (
        "differ in version",
        "The NVIDIA driver was updated but the old one is still loaded: reboot (or reload "
        "the driver).",
    ),
)


NOT_ANSWERED_KEYS = ("did not answer within", "has not answered for")
"""Words of the reasons given when NVML's start-up (``nvmlInit``, counting the GPUs) hangs."""
NOT_ANSWERED_PLAIN = (
    "The NVIDIA driver has not answered: its start-up call is hung (nvidia-smi would hang too). "
    "The GPUs may be there; ask the administrator to check the driver, or to reset the GPUs."
)


def plain_no_gpu(reason: str | None) -> str:
    """A sentence or two for people: what ``reason`` means, and where the simulated demo is.

    ``reason`` is a backend's ``BackendInfo.reason`` (NVML's words). Monitoring switched off on
    purpose (backend ``none``) gets no pointer to the demo, nor does a driver that did not
    answer (there may well be GPUs).
    """
    if reason and "switched off" in reason:
        return "GPU monitoring is switched off on this server (JupyterGpu.backend is 'none')."
    if reason and any(key in reason for key in NOT_ANSWERED_KEYS):
        return NOT_ANSWERED_PLAIN
    text = next((plain for key, plain in _PLAIN if reason and key in reason), None)
    if text is None:
        text = "No NVIDIA GPU can be used here" + (f" ({reason})." if reason else ".")
    return f"{text} {SIMULATED_DEMO}"


def backend_from_env(environ: Mapping[str, str] | None = None) -> str:
    """The backend ``JUPYTER_GPU_BACKEND`` names (``auto`` if unset or not a backend)."""
    env = os.environ if environ is None else environ
    value = env.get(BACKEND_ENV, "auto").strip().lower()
    return value if value in ("auto", "nvml", "simulated", "none") else "auto"


def simulated_devices_from_env(environ: Mapping[str, str] | None = None, default: int = 2) -> int:
    """The device count ``JUPYTER_GPU_SIMULATED_DEVICES`` names (1 to 16), else ``default``."""
    env = os.environ if environ is None else environ
    try:
        count = int(env.get(SIMULATED_DEVICES_ENV, default))
    except ValueError:
        return default
    return count if 1 <= count <= 16 else default


def simulated_epoch_from_env(environ: Mapping[str, str] | None = None) -> float | None:
    """The Unix time ``JUPYTER_GPU_SIMULATED_EPOCH`` names, else ``None``.

    ``None`` also when it is not a time or lies ahead of now: a backend then starts its own
    timeline.
    """
    env = os.environ if environ is None else environ
    try:
        epoch = float(env.get(SIMULATED_EPOCH_ENV, ""))
    except ValueError:
        return None
    return epoch if 0.0 < epoch <= time.time() + 1.0 else None  # 1 s: rounding, not skew
