"""Typed, immutable records of what one tick of sampling saw.

Units are in the field names (``_bytes``, ``_pct``, ``_w``, ``_c``, ``_mhz``, ``_s``). A value that
could not be read is ``None``, never a string; where NVML refused it, ``unavailable`` maps the
field name to NVML's reason (e.g. ``{"power_w": "Not Supported"}``). ``to_dict()`` gives the JSON
shape of ``docs/api.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

# The compile caches' records live with the code that scans them; a Sample carries them (and
# re-exports them, ``X as X``, for its readers).
from jupyter_gpu.compile_cache.records import NOT_SCANNED as NOT_SCANNED
from jupyter_gpu.compile_cache.records import CacheDirSample as CacheDirSample
from jupyter_gpu.compile_cache.records import CompileCacheSample as CompileCacheSample

BackendName = Literal["nvml", "simulated", "none"]
DeviceState = Literal["ok", "lost", "error", "not_responding"]
ReadingGroup = Literal["fast", "gpm", "pcie"]
"""The groups of a device's readings, each read on its own cadence (``freshness.py``)."""

_EMPTY: Mapping[str, str] = MappingProxyType({})


ProcessScope = Literal["server", "other", "unattributable"]


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """A process that holds memory on a GPU, or a row that stands for several.

    ``kernel_id``/``notebook`` name the Jupyter kernel (and its session's notebook path) that is
    this process or one of its parents; ``None`` for processes that are not this server's.
    ``idle_s`` is how long that kernel has been idle (from the kernel manager's last activity; 0
    while it runs a cell; ``None`` for other processes). ``idle_holder``: the kernel has been idle
    longer than ``JupyterGpu.idle_holder_minutes`` while its processes hold more than
    ``JupyterGpu.idle_holder_gib`` of GPU memory in all.

    ``scope`` says whose it is (``attribution.py`` decides):

    - ``"server"``: runs under this Jupyter server (a kernel, a terminal, what they started) or
      as its unix user: shown in full.
    - ``"other"``: another user's (or service's) process. Unless the admin option
      ``show_other_processes`` is on, the other processes of a GPU are one row with ``pid`` and
      ``name`` ``None``, their memory summed and ``process_count`` of them.
    - ``"unattributable"``: NVML's pids match no process visible here (a container's own pid
      namespace, with a driver that reports host pids): one row per GPU with their memory,
      ``process_count`` and ``reason`` (why, in a sentence for people).
    """

    pid: int | None
    name: str | None
    used_mem_bytes: int | None
    kernel_id: str | None = None
    notebook: str | None = None
    idle_s: float | None = None
    idle_holder: bool = False
    scope: ProcessScope = "server"
    process_count: int = 1
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "name": self.name,
            "used_mem_bytes": self.used_mem_bytes,
            "kernel_id": self.kernel_id,
            "notebook": self.notebook,
            "idle_s": self.idle_s,
            "idle_holder": self.idle_holder,
            "scope": self.scope,
            "process_count": self.process_count,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class MigInfo:
    """Where a MIG instance lives: its physical GPU and its instance ids (``nvidia-smi -L``).

    ``profile`` is the instance's size as NVIDIA names it (``"1g.18gb"``), from its name.
    """

    parent_index: int
    parent_uuid: str | None
    gpu_instance_id: int | None
    compute_instance_id: int | None
    profile: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "parent_index": self.parent_index,
            "parent_uuid": self.parent_uuid,
            "gpu_instance_id": self.gpu_instance_id,
            "compute_instance_id": self.compute_instance_id,
            "profile": self.profile,
        }


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """What does not change while the server runs: one GPU's identity and capacity.

    With MIG mode on, each MIG instance is a device of its own (its ``uuid`` starts with
    ``MIG-``) and ``mig`` says which physical GPU it is on; ``None`` for a whole GPU.
    """

    index: int
    uuid: str | None
    name: str | None
    mem_total_bytes: int | None
    power_limit_w: float | None
    pci_bus_id: str | None
    mig: MigInfo | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "uuid": self.uuid,
            "name": self.name,
            "mem_total_bytes": self.mem_total_bytes,
            "power_limit_w": self.power_limit_w,
            "pci_bus_id": self.pci_bus_id,
            "mig": self.mig.to_dict() if self.mig is not None else None,
        }


@dataclass(frozen=True, slots=True)
class DeviceSample:
    """One GPU at one tick (``nvidia-smi -q -d UTILIZATION,MEMORY,POWER,TEMPERATURE,CLOCK,PIDS``).

    ``state`` is ``"ok"``, ``"lost"`` (NVML says the GPU fell off the bus), ``"error"`` (every
    read failed) or ``"not_responding"`` (a read has not returned within the deadline: see
    ``deadline.py``; ``stale_s`` is then how many seconds ago it last answered); ``error`` is
    then a sentence for people. ``pcie_*`` are ``None`` unless the slow metrics are on.
    ``sm_active_pct``, ``sm_occupancy_pct``, ``tensor_active_pct`` and
    ``dram_bw_pct`` come from NVML's GPU Performance Monitoring (GPM, Hopper and newer; ``dcgmi
    dmon -e 1002,1003,1004,1005`` reads the same): averages over the last GPM window, ``None``
    (with "Not Supported" in ``unavailable``) on older GPUs and before the first window ends.

    Each group of readings carries its age: seconds from when it was read to the sample's
    ``ts`` (``read_age_s`` for the fast readings: utilization, memory, power, temperature,
    clocks and processes; ``gpm_age_s`` for the GPM fields; ``pcie_age_s`` for ``pcie_*``;
    ``None`` without such a reading). ``stale`` names the groups (``"fast"``, ``"gpm"``,
    ``"pcie"``) older than two of their own intervals (and ``"fast"`` for a not-responding GPU);
    their fields are ``None`` in this sample (``freshness.py``).
    """

    index: int
    uuid: str | None
    name: str | None
    state: DeviceState = "ok"
    error: str | None = None
    util_pct: float | None = None
    mem_util_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temperature_c: float | None = None
    sm_clock_mhz: int | None = None
    pcie_tx_bytes_per_s: float | None = None
    pcie_rx_bytes_per_s: float | None = None
    sm_active_pct: float | None = None
    sm_occupancy_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_bw_pct: float | None = None
    processes: tuple[ProcessSample, ...] = ()
    unavailable: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    stale_s: float | None = None
    read_age_s: float | None = None
    gpm_age_s: float | None = None
    pcie_age_s: float | None = None
    stale: tuple[ReadingGroup, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "uuid": self.uuid,
            "name": self.name,
            "state": self.state,
            "error": self.error,
            "util_pct": self.util_pct,
            "mem_util_pct": self.mem_util_pct,
            "mem_used_bytes": self.mem_used_bytes,
            "mem_total_bytes": self.mem_total_bytes,
            "power_w": self.power_w,
            "power_limit_w": self.power_limit_w,
            "temperature_c": self.temperature_c,
            "sm_clock_mhz": self.sm_clock_mhz,
            "pcie_tx_bytes_per_s": self.pcie_tx_bytes_per_s,
            "pcie_rx_bytes_per_s": self.pcie_rx_bytes_per_s,
            "sm_active_pct": self.sm_active_pct,
            "sm_occupancy_pct": self.sm_occupancy_pct,
            "tensor_active_pct": self.tensor_active_pct,
            "dram_bw_pct": self.dram_bw_pct,
            "processes": [p.to_dict() for p in self.processes],
            "unavailable": dict(self.unavailable),
            "stale_s": self.stale_s,
            "read_age_s": self.read_age_s,
            "gpm_age_s": self.gpm_age_s,
            "pcie_age_s": self.pcie_age_s,
            "stale": list(self.stale),
        }


GPM_FIELDS = ("sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_bw_pct")
"""The ``DeviceSample`` fields that NVML's GPM gives (each a percentage, 0 to 100)."""


@dataclass(frozen=True, slots=True)
class GpmReading:
    """One GPU's GPM metrics over one window (between two GPM samples), in percent.

    ``values`` maps each of ``GPM_FIELDS`` it could read to its value; ``unavailable`` maps the
    others to NVML's reason (``"Not Supported"`` on GPUs before Hopper).
    """

    values: Mapping[str, float] = field(default_factory=lambda: _EMPTY_FLOATS)
    unavailable: Mapping[str, str] = field(default_factory=lambda: _EMPTY)


_EMPTY_FLOATS: Mapping[str, float] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class HostSample:
    """The host (or the container's cgroup) at one tick.

    ``cpu_count`` is the CPUs this server may use (affinity and cgroup quota, so it can be
    fractional); ``mem_total_bytes`` is the cgroup memory limit where there is one
    (``mem_limit_source == "cgroup"``), else the machine's memory (``"host"``).
    ``cpu_pct`` is busy time as a percentage of ``cpu_count`` CPUs, ``None`` on a first reading.
    """

    cpu_pct: float | None
    cpu_count: float | None
    mem_used_bytes: int | None
    mem_total_bytes: int | None
    mem_limit_source: Literal["cgroup", "host"] = "host"

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpu_pct": self.cpu_pct,
            "cpu_count": self.cpu_count,
            "mem_used_bytes": self.mem_used_bytes,
            "mem_total_bytes": self.mem_total_bytes,
            "mem_limit_source": self.mem_limit_source,
        }


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """What a backend serves, fixed once it is open: the ``GET devices`` payload, less config."""

    backend: BackendName
    simulated: bool
    reason: str | None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    devices: tuple[DeviceInfo, ...] = ()

    @property
    def gpu_available(self) -> bool:
        """Whether there is at least one GPU to show (simulated ones count)."""
        return self.backend != "none" and bool(self.devices)

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "simulated": self.simulated,
            "gpu_available": self.gpu_available,
            "reason": self.reason,
            "driver_version": self.driver_version,
            "cuda_driver_version": self.cuda_driver_version,
            "devices": [d.to_dict() for d in self.devices],
        }


@dataclass(frozen=True, slots=True)
class Sample:
    """Everything one tick saw: the GPUs, the host and the compile caches.

    ``seq`` counts ticks from 1 in a sampler (0 for ``read_once``); ``ts`` is Unix time in
    seconds.
    """

    seq: int
    ts: float
    backend: BackendName
    simulated: bool
    reason: str | None
    devices: tuple[DeviceSample, ...]
    host: HostSample
    compile_cache: CompileCacheSample = NOT_SCANNED

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "ts": self.ts,
            "backend": self.backend,
            "simulated": self.simulated,
            "reason": self.reason,
            "devices": [d.to_dict() for d in self.devices],
            "host": self.host.to_dict(),
            "compile_cache": self.compile_cache.to_dict(),
        }
