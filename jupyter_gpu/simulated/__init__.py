"""Synthetic GPUs with moving load, labelled simulated everywhere: demos and tests without a GPU.

- ``backend.py``: ``SimulatedBackend``, H200-like devices running made-up training jobs.
- ``faults.py``: faults it shows on purpose (a lost GPU, a failing one, a hung call, a field
  that is "Not Supported"), parsed from ``JupyterGpu.simulated_faults``.
- ``topology.py``: the HGX board the GPUs sit on (``SimulatedBackend.topology()``).
- ``past.py``: a synthetic past for a demo's long ranges (``simulated_seed_history_s``).
"""

from __future__ import annotations

from jupyter_gpu.simulated.backend import SimulatedBackend
from jupyter_gpu.simulated.faults import SimulatedFault, parse_faults

__all__ = ["SimulatedBackend", "SimulatedFault", "parse_faults"]
