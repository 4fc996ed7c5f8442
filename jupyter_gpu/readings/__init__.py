"""What one reading of the GPUs is, and how every backend is read.

- ``catalog.py``: every reading declared once (its group, unit, Prometheus series, long
  history, chart); ``typescript.py`` writes it for the browser.
- ``records.py``: the typed, immutable records of a reading (``Sample``, ``DeviceSample``,
  ``GroupReading``, ``BackendInfo``...), frozen dataclasses with units in their names; they
  carry the host's and the compile caches' records, which live with the code that reads them.
  ``topology.py``: the records of how the GPUs are connected.
- ``merge.py``: one GPU's record from the latest reading of each of its groups.
- ``backend.py``: the interface every backend implements (``nvml``, ``simulated``:
  ``read_group``, ``topology``), and the backend of no GPU.
- ``deadline.py``: each GPU read in a worker thread of its own, behind a deadline, so that one
  hung GPU never stops another's readings.

It reads no hardware itself and imports neither ``pynvml`` nor torch.
"""

from __future__ import annotations

from jupyter_gpu.readings.backend import Backend, NoGpuBackend
from jupyter_gpu.readings.records import (
    NOT_SCANNED,
    BackendInfo,
    CacheDirSample,
    CompileCacheSample,
    DeviceInfo,
    DeviceSample,
    GroupReading,
    HostSample,
    MigInfo,
    ProcessSample,
    ProcessScope,
    Sample,
)

__all__ = [
    "NOT_SCANNED",
    "Backend",
    "BackendInfo",
    "CacheDirSample",
    "CompileCacheSample",
    "DeviceInfo",
    "DeviceSample",
    "GroupReading",
    "HostSample",
    "MigInfo",
    "NoGpuBackend",
    "ProcessSample",
    "ProcessScope",
    "Sample",
]
