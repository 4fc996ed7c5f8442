"""What one reading of the GPUs is, and how every backend is read.

- ``records.py``: the typed, immutable records of a reading (``Sample``, ``DeviceSample``,
  ``BackendInfo``...), frozen dataclasses with units in their names; they carry the host's and
  the compile caches' records, which live with the code that reads them.
- ``backend.py``: the interface every backend implements (``nvml``, ``simulated``), and the
  backend of no GPU.
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
