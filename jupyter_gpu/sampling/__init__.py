"""GPU and host sampling: the only package that talks to NVML.

Importing it is cheap: neither ``pynvml`` nor torch is imported until a backend is opened.

- ``read_once()``: one reading of the GPUs and the host, now (for ``%gpu`` and ``%memsummary``).
- ``Sampler``: the server's background sampler (one thread, one batched read per tick).
- The records (``Sample``, ``DeviceSample``, ...): frozen dataclasses with units in their names.
"""

from __future__ import annotations

import logging
import time

from jupyter_gpu.compile_cache import scan_caches
from jupyter_gpu.sampling.attribution import (
    KernelMap,
    KernelRef,
    ProcessAnnotator,
    default_root_pid,
    freeze_kernel_map,
    kernel_pids_of_server,
)
from jupyter_gpu.sampling.backend import Backend, NoGpuBackend
from jupyter_gpu.sampling.factory import BACKEND_CHOICES, open_backend
from jupyter_gpu.sampling.faults import SimulatedFault, parse_faults
from jupyter_gpu.sampling.history import Entry, History
from jupyter_gpu.sampling.host import HostReader
from jupyter_gpu.sampling.reasons import (
    BACKEND_ENV,
    backend_from_env,
    plain_no_gpu,
    simulated_devices_from_env,
    simulated_epoch_from_env,
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
    "Backend",
    "BackendInfo",
    "CacheDirSample",
    "CompileCacheSample",
    "DeviceInfo",
    "DeviceSample",
    "Entry",
    "History",
    "HostSample",
    "KernelMap",
    "KernelRef",
    "MigInfo",
    "NoGpuBackend",
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
]

_CPU_WINDOW_S = 0.1

# A library stays quiet unless the application configures logging (the server passes its own
# logger): without this, a warning would reach a notebook's stderr through logging.lastResort.
logging.getLogger("jupyter_gpu").addHandler(logging.NullHandler())


def read_once(backend: str = "auto", *, scan_cache: bool = False, slow: bool = False) -> Sample:
    """One reading of the GPUs and the host, now, in the calling thread; no background thread.

    NVML is initialised for this call and shut down after it (NVML counts inits, so a sampler
    in the same process is unaffected). Without a GPU the sample has ``backend == "none"`` and a
    ``reason``; nothing raises for a missing or failing GPU. ``processes[].kernel_id`` is
    ``None`` (kernel attribution needs the server); other users' processes are hidden as in the
    server (``ProcessAnnotator``). In a kernel of a simulated server, the simulated GPUs list
    that server's kernels, this one among them, as the server's own sampler does. Takes about
    0.1 s: host CPU % and the GPM metrics (SM/tensor activity, Hopper and newer) are measured
    over that window.

    Args:
        backend: ``auto`` (NVML if it works, else none), ``nvml``, ``simulated`` or ``none``.
        scan_cache: also walk the torch.compile caches (can take a second on a big cache).
        slow: also read PCIe throughput (about 21 ms per GPU with NVML).

    Raises:
        ValueError: for an unknown ``backend``.
    """
    host = HostReader()
    host.read()  # the first CPU reading only sets the baseline
    started = time.monotonic()
    # The simulated GPUs show this server's kernels, from the moment its own backend started.
    pids = kernel_pids_of_server(default_root_pid()) if backend == "simulated" else []
    opened = open_backend(
        backend,
        simulated_devices=simulated_devices_from_env(),
        simulated_epoch=simulated_epoch_from_env(),
        pids=lambda: pids,
    )
    try:
        info = opened.info()
        opened.read_gpm()  # opens the GPM window
        devices = opened.read()
        if slow:
            devices = with_slow_readings(devices, opened.read_slow())
        cache = scan_caches() if scan_cache else NOT_SCANNED
        time.sleep(max(0.0, _CPU_WINDOW_S - (time.monotonic() - started)))
        devices = with_gpm_readings(devices, opened.read_gpm())
    finally:
        opened.close()
    # In a kernel, "this server" is the Jupyter server that started it (JPY_PARENT_PID).
    devices = ProcessAnnotator().annotate(devices)
    return Sample(
        seq=0,
        ts=time.time(),
        backend=info.backend,
        simulated=info.simulated,
        reason=info.reason,
        devices=devices,
        host=host.read(),
        compile_cache=cache,
    )
