"""A fake NVML for tests: pynvml's interface over in-memory devices, with faults on demand.

It raises real ``pynvml.NVMLError`` instances (built from the real error codes), so the
production error handling in ``jupyter_gpu.nvml.backend`` is what gets tested. Inject it with
``NvmlBackend(nvml=FakeNvml(...))`` (or ``open_backend(nvml=...)``); pynvml itself is never
patched. Labelled fake everywhere: device names start with "Fake".

    fake = FakeNvml(devices=2)
    fake.fail("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_NOT_SUPPORTED, device=1)
    fake.lose(0)            # GPU 0 falls off the bus: every call on it raises GPU_IS_LOST
    fake.fail("nvmlInit", pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    fake.hang(1)            # every call on GPU 1 blocks (a hung driver) ...
    fake.release(1)         # ... until released: the blocked calls return
    fake.hang(0, calls={"nvmlGpmSampleGet"})  # only these calls on GPU 0 block
    fake.hang(None, calls={"nvmlInit"})  # a call on no GPU blocks: the driver hangs at start

Memory: ``mem_used`` is v2's ``used`` (what ``nvidia-smi`` shows); v1 adds ``mem_reserved``, as
real NVML does. ``memory_v2=False`` models a driver without ``nvmlDeviceGetMemoryInfo_v2``.
GPM: a device with ``gpm=True`` (Hopper) answers ``nvmlGpmQueryDeviceSupport`` as supported and
reports ``gpm_values`` (field name -> percent) between any two GPM samples; ``gpm=False`` is an
older GPU. The fake's GPM samples are plain objects, freed through ``nvmlGpmSampleFree``.
NVLink: a device has ``nvlinks`` links (0, the default: no NVLink, whose calls answer Not
Supported as a PCIe GPU's do), ``nvlinks_up`` of them active, and counters of the data sent and
received over all of them (``nvlink_tx_kib``, ``nvlink_rx_kib``, at ``nvlink_at_us``) that
``nvmlDeviceGetFieldValues`` reports for the scope of all links; a test moves them.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import psutil
import pynvml


@dataclass
class FakeDevice:
    """One fake GPU's readings (NVML's units: mW, KiB/s)."""

    index: int
    name: str = "Fake NVIDIA H200"
    mem_total: int = 150_754_820_096
    mem_used: int = 1_000_000_000
    util: int = 50
    mem_util: int = 20
    power_mw: int = 300_000
    limit_mw: int = 700_000
    temperature: int = 45
    sm_clock: int = 1980
    pcie_tx_kib: int = 1000
    pcie_rx_kib: int = 2000
    compute: list[tuple[int, int | None]] = field(default_factory=list)
    graphics: list[tuple[int, int | None]] = field(default_factory=list)
    mem_reserved: int = 600_000_000
    memory_v2: bool = True
    gpm: bool = True
    gpm_values: dict[str, float] = field(
        default_factory=lambda: {
            "sm_active_pct": 78.0,
            "sm_occupancy_pct": 14.0,
            "tensor_active_pct": 72.0,
            "dram_bw_pct": 18.0,
        }
    )
    nvlinks: int = 0
    nvlinks_up: int | None = None
    """Active links (``None``: all of them)."""
    nvlink_tx_kib: int = 0
    nvlink_rx_kib: int = 0
    nvlink_at_us: int = 0
    mig_enabled: bool = False
    mig_instances: list[FakeDevice | None] = field(default_factory=list)
    """MIG slots (``None``: an empty slot); only read with ``mig_enabled``."""
    gpu_instance_id: int | None = None
    """Set on a MIG instance (a ``FakeDevice`` in its GPU's ``mig_instances``)."""

    @property
    def uuid(self) -> str:
        if self.gpu_instance_id is not None:
            return f"MIG-fake0000-0000-4000-8000-{self.index:06d}{self.gpu_instance_id:06d}"
        return f"GPU-fake0000-0000-4000-8000-{self.index:012d}"


@dataclass(frozen=True)
class FakeHandle:
    index: int
    mig_slot: int | None = None


MIG_NOT_SUPPORTED = frozenset(
    {
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetEnforcedPowerLimit",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetPcieThroughput",
        "nvmlDeviceGetMigMode",
    }
)
"""What NVML refuses (NOT_SUPPORTED) on a MIG instance's handle, as on an H100/H200."""


_GPM_IDS = {
    pynvml.NVML_GPM_METRIC_SM_UTIL: "sm_active_pct",
    pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: "sm_occupancy_pct",
    pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: "tensor_active_pct",
    pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: "dram_bw_pct",
}


@dataclass
class FakeGpmSample:
    """An allocated GPM sample buffer: which device filled it, and when (a counter)."""

    device: int | None = None
    taken: int = 0
    freed: bool = False


class _FakeMetric:
    def __init__(self) -> None:
        self.metricId = 0
        self.nvmlReturn = 0
        self.value = 0.0


class FakeGpmMetricsGet:
    """``c_nvmlGpmMetricsGet_t``'s fields, as plain attributes."""

    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1: FakeGpmSample | None = None
        self.sample2: FakeGpmSample | None = None
        self.metrics = [_FakeMetric() for _ in range(8)]


class FakeNvml:
    """pynvml's functions and constants over ``FakeDevice``s.

    Args:
        devices: how many devices (0 models "no GPU").
        pcie_delay_s: how long ``nvmlDeviceGetPcieThroughput`` takes (real NVML: ~21 ms).
    """

    NVMLError = pynvml.NVMLError
    c_nvmlGpmMetricsGet_t = FakeGpmMetricsGet
    nvmlMemory_v2 = pynvml.nvmlMemory_v2
    NVML_GPM_METRICS_GET_VERSION = pynvml.NVML_GPM_METRICS_GET_VERSION

    def __init__(self, devices: int = 2, *, pcie_delay_s: float = 0.0) -> None:
        for name in dir(pynvml):
            if name.startswith("NVML_"):
                setattr(self, name, getattr(pynvml, name))
        self.devices = [FakeDevice(i) for i in range(devices)]
        self.pcie_delay_s = pcie_delay_s
        self.drop_ended_processes = False
        """List only processes that still exist, as NVML does (off: list what tests set)."""
        self.calls: Counter[str] = Counter()
        self.inits = 0
        self.shutdowns = 0
        self._faults: dict[tuple[str, int | None], int] = {}
        self._lost: set[int] = set()
        self._hangs: dict[int | None, tuple[threading.Event, frozenset[str] | None]] = {}
        self.hung_calls = 0
        """Calls that blocked in a hang (released or not)."""
        self._lock = threading.Lock()
        self.gpm_samples: list[FakeGpmSample] = []
        self._gpm_clock = 0

    # -- fault injection

    def fail(self, function: str, code: int, device: int | None = None) -> None:
        """Make ``function`` raise ``NVMLError(code)`` (on one device, or on every call)."""
        self._faults[(function, device)] = code

    def heal(self, function: str, device: int | None = None) -> None:
        """Undo ``fail``."""
        self._faults.pop((function, device), None)

    def lose(self, device: int) -> None:
        """The GPU falls off the bus: every call on it raises NVML_ERROR_GPU_IS_LOST."""
        self._lost.add(device)

    def hang(self, device: int | None, calls: Collection[str] | None = None) -> None:
        """Every call on ``device`` blocks, as NVML's do when a driver stops answering.

        ``calls``: only these functions block (e.g. ``{"nvmlGpmSampleGet"}``); default all.
        ``device`` ``None``: the calls on no GPU (``nvmlInit``, ``nvmlDeviceGetCount``, ...).
        """
        with self._lock:
            only = frozenset(calls) if calls is not None else None
            self._hangs.setdefault(device, (threading.Event(), only))

    def release(self, device: int | None) -> None:
        """The GPU answers again: calls blocked by ``hang`` return, new ones do not block."""
        with self._lock:
            hang = self._hangs.pop(device, None)
        if hang is not None:
            hang[0].set()

    @contextmanager
    def released_after(self, device: int | None, at_most_s: float = 30.0) -> Iterator[None]:
        """A ``hang`` on ``device`` lasts at most ``at_most_s``, and ends with the block.

        Without a deadline in the code under test the call would block for good; this way the
        test fails (on its timing) instead of hanging the suite.
        """
        timer = threading.Timer(at_most_s, self.release, [device])
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
            self.release(device)

    def enable_mig(self, device: int, profiles: list[tuple[str, int] | None]) -> list[FakeDevice]:
        """Put GPU ``device`` in MIG mode with one instance per ``(profile, memory bytes)``.

        ``None`` leaves that slot empty (NVML answers NOT_FOUND for it). Returns the instances.
        """
        gpu = self.devices[device]
        gpu.mig_enabled = True
        gpu.mig_instances = [
            None
            if spec is None
            else FakeDevice(
                device,
                name=f"{gpu.name} MIG {spec[0]}",
                mem_total=spec[1],
                mem_used=spec[1] // 10,
                gpu_instance_id=slot + 1,
            )
            for slot, spec in enumerate(profiles)
        ]
        return [m for m in gpu.mig_instances if m is not None]

    def _enter(self, function: str, handle: FakeHandle | None = None) -> FakeDevice | None:
        with self._lock:
            self.calls[function] += 1
        index = handle.index if handle is not None else None
        with self._lock:
            hang = self._hangs.get(index)
            blocked = None
            if hang is not None and (hang[1] is None or function in hang[1]):
                blocked = hang[0]
                self.hung_calls += 1
        if blocked is not None:
            blocked.wait()
        if index is not None and index in self._lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        code = self._faults.get((function, index), self._faults.get((function, None)))
        if code is not None:
            raise pynvml.NVMLError(code)
        if index is None or handle is None:
            return None
        if handle.mig_slot is None:
            return self.devices[index]
        if function in MIG_NOT_SUPPORTED:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        instance = self.devices[index].mig_instances[handle.mig_slot]
        assert instance is not None
        return instance

    def _device(self, function: str, handle: FakeHandle) -> FakeDevice:
        device = self._enter(function, handle)
        assert device is not None
        return device

    # -- library

    def nvmlInit(self) -> None:
        self._enter("nvmlInit")
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return "580.159.04"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return 13000

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        handle = FakeHandle(index)
        self._enter("nvmlDeviceGetHandleByIndex", handle)
        return handle

    # -- static

    def nvmlDeviceGetUUID(self, handle: FakeHandle) -> str:
        return self._device("nvmlDeviceGetUUID", handle).uuid

    def nvmlDeviceGetName(self, handle: FakeHandle) -> str:
        return self._device("nvmlDeviceGetName", handle).name

    def nvmlDeviceGetPciInfo(self, handle: FakeHandle) -> Any:
        d = self._device("nvmlDeviceGetPciInfo", handle)
        return SimpleNamespace(busId=f"00000000:{0x18 + d.index:02X}:00.0".encode())

    # -- MIG (read when the backend opens)

    def nvmlDeviceGetMigMode(self, handle: FakeHandle) -> list[int]:
        d = self._device("nvmlDeviceGetMigMode", handle)
        mode = pynvml.NVML_DEVICE_MIG_ENABLE if d.mig_enabled else pynvml.NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: FakeHandle) -> int:
        d = self._device("nvmlDeviceGetMaxMigDeviceCount", handle)
        return max(7, len(d.mig_instances)) if d.mig_enabled else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: FakeHandle, slot: int) -> FakeHandle:
        d = self._device("nvmlDeviceGetMigDeviceHandleByIndex", handle)
        if not d.mig_enabled:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if slot >= len(d.mig_instances) or d.mig_instances[slot] is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return FakeHandle(handle.index, slot)

    def nvmlDeviceGetGpuInstanceId(self, handle: FakeHandle) -> int:
        d = self._device("nvmlDeviceGetGpuInstanceId", handle)
        if d.gpu_instance_id is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return d.gpu_instance_id

    def nvmlDeviceGetComputeInstanceId(self, handle: FakeHandle) -> int:
        d = self._device("nvmlDeviceGetComputeInstanceId", handle)
        if d.gpu_instance_id is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return 0

    # -- per tick

    def nvmlDeviceGetUtilizationRates(self, handle: FakeHandle) -> Any:
        d = self._device("nvmlDeviceGetUtilizationRates", handle)
        return SimpleNamespace(gpu=d.util, memory=d.mem_util)

    def nvmlDeviceGetMemoryInfo(self, handle: FakeHandle, version: int | None = None) -> Any:
        if version:  # pynvml calls nvmlDeviceGetMemoryInfo_v2 in the library then
            # A fault set on nvmlDeviceGetMemoryInfo applies to both versions.
            self._device("nvmlDeviceGetMemoryInfo", handle)
            d = self._device("nvmlDeviceGetMemoryInfo_v2", handle)
            if not d.memory_v2:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
            assert version == pynvml.nvmlMemory_v2
            free = d.mem_total - d.mem_used - d.mem_reserved
            return SimpleNamespace(
                version=version,
                total=d.mem_total,
                reserved=d.mem_reserved,
                used=d.mem_used,
                free=free,
            )
        d = self._device("nvmlDeviceGetMemoryInfo", handle)
        used = d.mem_used + d.mem_reserved
        return SimpleNamespace(total=d.mem_total, used=used, free=d.mem_total - used)

    def nvmlDeviceGetPowerUsage(self, handle: FakeHandle) -> int:
        return self._device("nvmlDeviceGetPowerUsage", handle).power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: FakeHandle) -> int:
        return self._device("nvmlDeviceGetEnforcedPowerLimit", handle).limit_mw

    def nvmlDeviceGetTemperature(self, handle: FakeHandle, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._device("nvmlDeviceGetTemperature", handle).temperature

    def nvmlDeviceGetClockInfo(self, handle: FakeHandle, clock: int) -> int:
        assert clock == pynvml.NVML_CLOCK_SM
        return self._device("nvmlDeviceGetClockInfo", handle).sm_clock

    def _processes(self, listed: list[tuple[int, int | None]]) -> list[Any]:
        if self.drop_ended_processes:
            listed = [(p, m) for p, m in listed if psutil.pid_exists(p)]
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in listed]

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeHandle) -> list[Any]:
        return self._processes(self._device("nvmlDeviceGetComputeRunningProcesses", handle).compute)

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: FakeHandle) -> list[Any]:
        return self._processes(
            self._device("nvmlDeviceGetGraphicsRunningProcesses", handle).graphics
        )

    def nvmlDeviceGetPcieThroughput(self, handle: FakeHandle, counter: int) -> int:
        d = self._device("nvmlDeviceGetPcieThroughput", handle)
        if self.pcie_delay_s:
            time.sleep(self.pcie_delay_s)
        return d.pcie_tx_kib if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES else d.pcie_rx_kib

    # -- NVLink: link states, and the throughput counters of the field values API

    def nvmlDeviceGetNvLinkState(self, handle: FakeHandle, link: int) -> int:
        d = self._device("nvmlDeviceGetNvLinkState", handle)
        if not d.nvlinks:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if link >= d.nvlinks:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        up = d.nvlinks if d.nvlinks_up is None else d.nvlinks_up
        return 1 if link < up else 0

    def nvmlDeviceGetFieldValues(
        self, handle: FakeHandle, field_ids: list[int | tuple[int, int]]
    ) -> list[SimpleNamespace]:
        """Each asked field, as ``c_nvmlFieldValue_t`` has it (NVLink throughput only)."""
        d = self._device("nvmlDeviceGetFieldValues", handle)
        counters = {
            pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: d.nvlink_tx_kib,
            pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: d.nvlink_rx_kib,
        }
        out = []
        for asked in field_ids:
            field_id, scope = asked if isinstance(asked, tuple) else (asked, 0)
            known = field_id in counters and d.nvlinks and scope == 0xFFFFFFFF
            out.append(
                SimpleNamespace(
                    fieldId=field_id,
                    scopeId=scope,
                    timestamp=d.nvlink_at_us,
                    latencyUsec=0,
                    valueType=pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG,
                    nvmlReturn=0 if known else pynvml.NVML_ERROR_NOT_SUPPORTED,
                    value=SimpleNamespace(ullVal=counters.get(field_id, 0) if known else 0),
                )
            )
        return out

    # -- GPM: Hopper and newer

    def nvmlGpmQueryDeviceSupport(self, handle: FakeHandle) -> Any:
        d = self._device("nvmlGpmQueryDeviceSupport", handle)
        return SimpleNamespace(version=1, isSupportedDevice=int(d.gpm))

    def nvmlGpmSampleAlloc(self) -> FakeGpmSample:
        self._enter("nvmlGpmSampleAlloc")
        sample = FakeGpmSample()
        self.gpm_samples.append(sample)
        return sample

    def nvmlGpmSampleFree(self, sample: FakeGpmSample) -> None:
        self._enter("nvmlGpmSampleFree")
        assert not sample.freed, "a GPM sample freed twice"
        sample.freed = True

    def nvmlGpmSampleGet(self, handle: FakeHandle, sample: FakeGpmSample) -> FakeGpmSample:
        d = self._device("nvmlGpmSampleGet", handle)
        if not d.gpm:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        assert not sample.freed, "a freed GPM sample was used"
        self._gpm_clock += 1
        sample.device, sample.taken = d.index, self._gpm_clock
        return sample

    def nvmlGpmMetricsGet(self, request: FakeGpmMetricsGet) -> FakeGpmMetricsGet:
        self._enter("nvmlGpmMetricsGet")
        first, second = request.sample1, request.sample2
        assert first is not None
        assert second is not None
        assert request.version == pynvml.NVML_GPM_METRICS_GET_VERSION
        if first.device != second.device or first.taken >= second.taken:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        assert first.device is not None
        d = self.devices[first.device]
        for metric in request.metrics[: request.numMetrics]:
            name = _GPM_IDS.get(metric.metricId)
            if name is None or name not in d.gpm_values:
                metric.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
            else:
                metric.nvmlReturn = 0
                metric.value = d.gpm_values[name]
        return request
