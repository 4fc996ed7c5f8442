"""Which backend to open (``auto``, ``nvml``, ``simulated``, ``none``), and why there is no GPU.

- ``factory.py``: ``open_backend`` opens the one the settings name; ``auto`` falls back to no
  GPU, with NVML's reason, and never to the simulated GPUs.
- ``reasons.py``: that reason in plain words for people, and the environment through which a
  server's kernels use its backend (``JUPYTER_GPU_BACKEND``...).

The only package that knows both backends (``jupyter_gpu.nvml``, ``jupyter_gpu.simulated``).
"""

from __future__ import annotations

from jupyter_gpu.backends.factory import BACKEND_CHOICES, open_backend
from jupyter_gpu.backends.reasons import (
    BACKEND_ENV,
    backend_from_env,
    plain_no_gpu,
    simulated_devices_from_env,
)

__all__ = [
    "BACKEND_CHOICES",
    "BACKEND_ENV",
    "backend_from_env",
    "open_backend",
    "plain_no_gpu",
    "simulated_devices_from_env",
]
