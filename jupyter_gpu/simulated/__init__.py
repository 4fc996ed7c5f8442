"""Synthetic GPUs with moving load, labelled simulated everywhere: demos and tests without a GPU.

- ``backend.py``: ``SimulatedBackend``, H200-like devices running made-up training jobs.
- ``faults.py``: faults it shows on purpose (a lost GPU, a failing one, a hung call, a field
  that is "Not Supported"), parsed from ``JupyterGpu.simulated_faults``.
"""

from __future__ import annotations

from jupyter_gpu.simulated.backend import SimulatedBackend
from jupyter_gpu.simulated.faults import SimulatedFault, parse_faults

__all__ = ["SimulatedBackend", "SimulatedFault", "parse_faults"]
