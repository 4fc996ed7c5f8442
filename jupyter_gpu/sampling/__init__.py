"""Samples of the GPUs and the host: the server's background sampler, and one reading now.

- ``Sampler``: the server's sampler (one tick thread; each GPU read in its own workers, behind
  a deadline; GPM, PCIe and the compile-cache scan in threads of their own), with its
  full-resolution ``History`` and its min/mean/max buckets (``buckets.py``).
- ``read_once()``: one reading of the GPUs and the host, now, in the calling process (for
  ``%gpu`` and ``%memsummary`` in a kernel), each GPU behind a deadline; ``topology_once()``
  how they are connected (``%gpu --topology``).
- What both use: merging the groups' readings of their own cadences with their ages
  (``freshness.py``) and naming which kernel holds which GPU memory (``attribution.py``).

The GPUs come from a backend (``jupyter_gpu.backends`` opens one), the host from
``jupyter_gpu.host``, the caches from ``jupyter_gpu.compile_cache``; the records are
``jupyter_gpu.readings``'. Importing it is cheap: neither ``pynvml`` nor torch is imported.
"""

from __future__ import annotations

from jupyter_gpu.sampling.attribution import (
    KernelMap,
    KernelRef,
    ProcessAnnotator,
    freeze_kernel_map,
)
from jupyter_gpu.sampling.history import Entry, History
from jupyter_gpu.sampling.once import read_once, topology_once
from jupyter_gpu.sampling.sampler import Sampler, SamplerOptions

__all__ = [
    "Entry",
    "History",
    "KernelMap",
    "KernelRef",
    "ProcessAnnotator",
    "Sampler",
    "SamplerOptions",
    "freeze_kernel_map",
    "read_once",
    "topology_once",
]
