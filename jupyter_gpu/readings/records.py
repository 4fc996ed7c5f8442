"""Typed, immutable records of what one tick of sampling saw.

Units are in the field names (``_bytes``, ``_pct``, ``_w``, ``_c``, ``_mhz``, ``_s``). A value that
could not be read is ``None``, never a string; where NVML refused it, ``unavailable`` maps the
field name to NVML's reason (e.g. ``{"power_w": "Not Supported"}``). ``to_dict()`` gives the JSON
shape of ``docs/api.md``: every field, in order (``jupyter_gpu.json_record``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

# The compile caches' records live with the code that scans them; a Sample carries them (and
# re-exports them, ``X as X``, for its readers).
from jupyter_gpu.compile_cache.records import NOT_SCANNED as NOT_SCANNED
from jupyter_gpu.compile_cache.records import CacheDirSample as CacheDirSample
from jupyter_gpu.compile_cache.records import CompileCacheSample as CompileCacheSample
from jupyter_gpu.json_record import JsonRecord
from jupyter_gpu.readings import catalog
from jupyter_gpu.readings.catalog import Layout

BackendName = Literal["nvml", "simulated", "none"]
DeviceState = Literal["ok", "lost", "error", "not_responding"]
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
class GroupReading:
    """One read of one group of a GPU's readings (``catalog.GROUPS``): the one shape of them all.

    ``values`` maps the group's metric fields it read to their values (``None`` or absent: not
    read); ``unavailable`` maps those NVML refused to its reason (``"Not Supported"``). Only the
    tick group's read (``fast``) fills the rest: the GPU's ``processes``, and its ``state``
    (``"lost"``, ``"error"``, ``"not_responding"``, with ``error`` in words and, not
    responding, ``stale_s``: seconds since it last answered).
    """

    values: Mapping[str, float | None] = field(default_factory=lambda: _EMPTY_VALUES)
    unavailable: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    processes: tuple[ProcessSample, ...] = ()
    state: DeviceState = "ok"
    error: str | None = None
    stale_s: float | None = None

    @property
    def has_values(self) -> bool:
        """Whether it read any value (a reading of nothing but refusals has no age)."""
        return any(v is not None for v in self.values.values())


_EMPTY_VALUES: Mapping[str, float | None] = MappingProxyType({})


# Its slots are written out, not made by ``slots=True``: that makes a second class, whose frozen
# ``__setattr__`` raises TypeError rather than FrozenInstanceError for a metric's name.
@dataclass(frozen=True, init=False, repr=False)
class DeviceSample(JsonRecord):
    """One GPU at one tick (``nvidia-smi -q -d UTILIZATION,MEMORY,POWER,TEMPERATURE,CLOCK,PIDS``).

    ``state`` is ``"ok"``, ``"lost"`` (NVML says the GPU fell off the bus), ``"error"`` (every
    read failed) or ``"not_responding"`` (a read has not returned within the deadline: see
    ``deadline.py``; ``stale_s`` is then how many seconds ago it last answered); ``error`` is
    then a sentence for people.

    Its readings are the catalog's metrics (``catalog.METRICS``: ``util_pct``,
    ``mem_used_bytes``, ``sm_active_pct``...), read as attributes (``device.util_pct``) and
    written in the API's JSON in the catalog's order; ``None`` where not read, with NVML's reason
    in ``unavailable`` where it refused. Each group of readings carries its age, seconds from
    when it was read to the sample's ``ts`` (``read_age_s`` for the fast readings,
    ``gpm_age_s``, ``pcie_age_s``...: ``None`` without such a reading). ``stale`` names the
    groups older than two of their own intervals (and ``"fast"`` for a not-responding GPU);
    their fields are ``None`` in this sample (``sampling/freshness.py``).

    Made as ``DeviceSample(index, uuid, name, util_pct=..., read_age_s=..., ...)``: a keyword
    that is neither a field nor a metric or age field of the catalog is a ``TypeError``. The
    values are kept in the catalog's order (``values``, ``ages``: a tuple costs less memory
    than a dict per device in the history), with the ``catalog.Layout`` they were made with.
    """

    __slots__ = (
        "ages",
        "error",
        "index",
        "layout",
        "name",
        "processes",
        "stale",
        "stale_s",
        "state",
        "unavailable",
        "uuid",
        "values",
    )

    index: int
    uuid: str | None
    name: str | None
    state: DeviceState
    error: str | None
    values: tuple[float | None, ...]
    processes: tuple[ProcessSample, ...]
    unavailable: Mapping[str, str]
    stale_s: float | None
    ages: tuple[float | None, ...]
    stale: tuple[str, ...]
    layout: Layout

    def __init__(
        self,
        index: int,
        uuid: str | None,
        name: str | None,
        state: DeviceState = "ok",
        error: str | None = None,
        *,
        values: tuple[float | None, ...] | None = None,
        processes: tuple[ProcessSample, ...] = (),
        unavailable: Mapping[str, str] = _EMPTY,
        stale_s: float | None = None,
        ages: tuple[float | None, ...] | None = None,
        stale: tuple[str, ...] = (),
        layout: Layout | None = None,
        **readings: float | None,
    ) -> None:
        made = layout if layout is not None else catalog.layout()
        row: list[float | None] = list(values or (None,) * len(made.metrics))
        age_row: list[float | None] = list(ages or (None,) * len(made.groups))
        for key, value in readings.items():
            if (at := made.metric_index.get(key)) is not None:
                row[at] = value
            elif (at := made.age_index.get(key)) is not None:
                age_row[at] = value
            else:
                raise TypeError(f"DeviceSample has no reading {key!r} (see readings/catalog.py)")
        put = object.__setattr__
        put(self, "index", index)
        put(self, "uuid", uuid)
        put(self, "name", name)
        put(self, "state", state)
        put(self, "error", error)
        put(self, "values", tuple(row))
        put(self, "processes", processes)
        put(self, "unavailable", unavailable)
        put(self, "stale_s", stale_s)
        put(self, "ages", tuple(age_row))
        put(self, "stale", stale)
        put(self, "layout", made)

    def __getattr__(self, name: str) -> float | None:
        """A metric (``util_pct``) or an age field (``read_age_s``) of the catalog, by name.

        Raises:
            AttributeError: neither.
        """
        if name in _OWN:  # a slot not set yet (copying, unpickling): no catalog lookup
            raise AttributeError(name)
        made = self.layout
        if (at := made.metric_index.get(name)) is not None:
            return self.values[at]
        if (at := made.age_index.get(name)) is not None:
            return self.ages[at]
        raise AttributeError(f"DeviceSample has no attribute or reading {name!r}")

    def __getstate__(self) -> tuple[Any, ...]:
        """Its slots' values (for ``pickle`` and ``copy``: it has no ``__dict__``)."""
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for name, value in zip(self.__slots__, state, strict=True):
            object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        """Its fields, with the readings and ages that have a value under their own names."""
        made = self.layout
        read = [f"{m.field}={v!r}" for m, v in zip(made.metrics, self.values, strict=True) if v]
        aged = [f"{g.age_field}={a!r}" for g, a in zip(made.groups, self.ages, strict=True) if a]
        return (
            f"DeviceSample(index={self.index!r}, uuid={self.uuid!r}, name={self.name!r}, "
            f"state={self.state!r}, error={self.error!r}, {', '.join([*read, *aged])}, "
            f"processes={self.processes!r}, unavailable={dict(self.unavailable)!r}, "
            f"stale_s={self.stale_s!r}, stale={self.stale!r})"
        )

    def value(self, field_name: str) -> float | None:
        """The metric ``field_name`` (``None``: not read, or not a metric of this sample)."""
        at = self.layout.metric_index.get(field_name)
        return None if at is None else self.values[at]

    def readings(self) -> dict[str, float | None]:
        """Every metric of the catalog by field, in its order."""
        return {m.field: v for m, v in zip(self.layout.metrics, self.values, strict=True)}

    @classmethod
    def json_names(cls) -> tuple[str, ...]:
        return _json_names(catalog.layout())

    def to_dict(self) -> dict[str, Any]:
        made = self.layout
        out: dict[str, Any] = {
            "index": self.index,
            "uuid": self.uuid,
            "name": self.name,
            "state": self.state,
            "error": self.error,
        }
        for metric, value in zip(made.metrics, self.values, strict=True):
            out[metric.field] = value
        out["processes"] = [p.to_dict() for p in self.processes]
        out["unavailable"] = dict(self.unavailable)
        out["stale_s"] = self.stale_s
        for group, age in zip(made.groups, self.ages, strict=True):
            out[group.age_field] = age
        out["stale"] = list(self.stale)
        return out


_OWN = frozenset(f.name for f in dataclasses.fields(DeviceSample))


def _json_names(made: Layout) -> tuple[str, ...]:
    """The keys of a device's JSON under ``made``, in order (as ``to_dict`` writes them)."""
    return (
        "index",
        "uuid",
        "name",
        "state",
        "error",
        *(m.field for m in made.metrics),
        "processes",
        "unavailable",
        "stale_s",
        *(g.age_field for g in made.groups),
        "stale",
    )


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
