"""GPU and host sampling: the only package that talks to NVML.

Importing it is cheap: neither ``pynvml`` nor torch is imported until a backend is opened.

- ``read_once()``: one reading of the GPUs and the host, now (for ``%gpu`` and ``%memsummary``),
  each GPU behind a deadline.
- ``Sampler``: the server's background sampler (one tick thread; each GPU read in its own
  workers, behind a deadline).
- The records (``Sample``, ``DeviceSample``, ...): frozen dataclasses with units in their names.
"""

from __future__ import annotations

import logging

from jupyter_gpu.sampling.attribution import (
    KernelMap,
    KernelRef,
    ProcessAnnotator,
    freeze_kernel_map,
)
from jupyter_gpu.sampling.backend import Backend, NoGpuBackend
from jupyter_gpu.sampling.factory import BACKEND_CHOICES, open_backend
from jupyter_gpu.sampling.faults import SimulatedFault, parse_faults
from jupyter_gpu.sampling.history import Entry, History
from jupyter_gpu.sampling.host import HostReader
from jupyter_gpu.sampling.once import read_once
from jupyter_gpu.sampling.reasons import (
    BACKEND_ENV,
    backend_from_env,
    plain_no_gpu,
    simulated_devices_from_env,
)
from jupyter_gpu.sampling.records import (
    NOT_SCANNED,
    BackendInfo,
    CacheDirSample,
    CompileCacheSample,
    DeviceInfo,
    DeviceSample,
    HostSample,
    MigInfo,
    ProcessSample,
    ProcessScope,
    Sample,
)
from jupyter_gpu.sampling.sampler import (
    Sampler,
    SamplerOptions,
    with_gpm_readings,
    with_slow_readings,
)

__all__ = [
    "BACKEND_CHOICES",
    "BACKEND_ENV",
    "NOT_SCANNED",
    "Backend",
    "BackendInfo",
    "CacheDirSample",
    "CompileCacheSample",
    "DeviceInfo",
    "DeviceSample",
    "Entry",
    "History",
    "HostReader",
    "HostSample",
    "KernelMap",
    "KernelRef",
    "MigInfo",
    "NoGpuBackend",
    "ProcessAnnotator",
    "ProcessSample",
    "ProcessScope",
    "Sample",
    "Sampler",
    "SamplerOptions",
    "SimulatedFault",
    "backend_from_env",
    "freeze_kernel_map",
    "open_backend",
    "parse_faults",
    "plain_no_gpu",
    "read_once",
    "simulated_devices_from_env",
    "with_gpm_readings",
    "with_slow_readings",
]

# A library stays quiet unless the application configures logging (the server passes its own
# logger): without this, a warning would reach a notebook's stderr through logging.lastResort.
logging.getLogger("jupyter_gpu").addHandler(logging.NullHandler())
