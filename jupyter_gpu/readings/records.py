"""Typed, immutable records of what one tick of sampling saw.

Units are in the field names (``_bytes``, ``_pct``, ``_w``, ``_c``, ``_mhz``, ``_s``). A value that
could not be read is ``None``, never a string; where NVML refused it, ``unavailable`` maps the
field name to NVML's reason (e.g. ``{"power_w": "Not Supported"}``). ``to_dict()`` gives the JSON
shape of ``docs/api.md``: every field, in order (``jupyter_gpu.json_record``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

# The compile caches' records live with the code that scans them; a Sample carries them (and
# re-exports them, ``X as X``, for its readers).
from jupyter_gpu.compile_cache.records import NOT_SCANNED as NOT_SCANNED
from jupyter_gpu.compile_cache.records import CacheDirSample as CacheDirSample
from jupyter_gpu.compile_cache.records import CompileCacheSample as CompileCacheSample
from jupyter_gpu.json_record import JsonRecord

BackendName = Literal["nvml", "simulated", "none"]
DeviceState = Literal["ok", "lost", "error", "not_responding"]
ReadingGroup = Literal["fast", "gpm", "pcie"]
"""The groups of a device's readings, each read on its own cadence (``freshness.py``)."""

_EMPTY: Mapping[str, str] = MappingProxyType({})


ProcessScope = Literal["server", "other", "unattributable"]


@dataclass(frozen=True, slots=True)
class ProcessSample(JsonRecord):
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


@dataclass(frozen=True, slots=True)
class MigInfo(JsonRecord):
    """Where a MIG instance lives: its physical GPU and its instance ids (``nvidia-smi -L``).

    ``profile`` is the instance's size as NVIDIA names it (``"1g.18gb"``), from its name.
    """

    parent_index: int
    parent_uuid: str | None
    gpu_instance_id: int | None
    compute_instance_id: int | None
    profile: str | None


@dataclass(frozen=True, slots=True)
class DeviceInfo(JsonRecord):
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


@dataclass(frozen=True, slots=True)
class DeviceSample(JsonRecord):
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


FAST_READINGS = (
    "util_pct",
    "mem_util_pct",
    "mem_used_bytes",
    "power_w",
    "power_limit_w",
    "temperature_c",
    "sm_clock_mhz",
)
"""The ``DeviceSample`` numbers read every tick (with ``processes``, the "fast" group)."""
PCIE_FIELDS = ("pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s")
"""The ``DeviceSample`` fields of the PCIe throughput read (a round of its own: it takes 20 ms)."""
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
class HostSample(JsonRecord):
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


@dataclass(frozen=True, slots=True)
class BackendInfo(JsonRecord):
    """What a backend serves, fixed once it is open: the ``GET devices`` payload, less config.

    While NVML has not answered (``nvmlInit`` or counting the GPUs has not returned), the
    sampler serves one of these with no devices, ``reason`` saying so and ``nvml_wait_s`` the
    seconds it has waited (``None`` once the backend is open, and for every backend's own).
    """

    backend: BackendName
    simulated: bool
    gpu_available: bool = field(init=False)
    """Whether there is at least one GPU to show (simulated ones count); set from the others."""
    reason: str | None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    devices: tuple[DeviceInfo, ...] = ()
    nvml_wait_s: float | None = None

    def __post_init__(self) -> None:
        # A field (not a property) so that it is in the JSON, after `simulated`, as it was.
        object.__setattr__(self, "gpu_available", self.backend != "none" and bool(self.devices))


@dataclass(frozen=True, slots=True)
class Sample(JsonRecord):
    """Everything one tick saw: the GPUs, the host and the compile caches.

    ``seq`` counts ticks from 1 in a sampler (0 for ``read_once``); ``ts`` is Unix time in
    seconds. ``nvml_wait_s``: seconds NVML has not answered for while the server starts it
    (``nvmlInit`` or counting the GPUs hung; ``reason`` then says so and ``devices`` is empty),
    ``None`` once it has answered.
    """

    seq: int
    ts: float
    backend: BackendName
    simulated: bool
    reason: str | None
    devices: tuple[DeviceSample, ...]
    host: HostSample
    compile_cache: CompileCacheSample = NOT_SCANNED
    nvml_wait_s: float | None = None
