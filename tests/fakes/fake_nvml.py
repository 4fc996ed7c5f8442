"""A fake NVML for tests: pynvml's interface over in-memory devices, with faults on demand.

It raises real ``pynvml.NVMLError`` instances (built from the real error codes), so the
production error handling in ``jupyter_gpu.sampling.nvml`` is what gets tested. Inject it with
``NvmlBackend(nvml=FakeNvml(...))`` (or ``open_backend(nvml=...)``); pynvml itself is never
patched. Labelled fake everywhere: device names start with "Fake".

    fake = FakeNvml(devices=2)
    fake.fail("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_NOT_SUPPORTED, device=1)
    fake.lose(0)            # GPU 0 falls off the bus: every call on it raises GPU_IS_LOST
    fake.fail("nvmlInit", pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

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

    @property
    def uuid(self) -> str:
        return f"GPU-fake0000-0000-4000-8000-{self.index:012d}"


@dataclass(frozen=True)
class FakeHandle:
    index: int


class FakeNvml:
    """pynvml's functions and constants over ``FakeDevice``s.

    Args:
        devices: how many devices (0 models "no GPU").
        pcie_delay_s: how long ``nvmlDeviceGetPcieThroughput`` takes (real NVML: ~21 ms).
    """

    NVMLError = pynvml.NVMLError

    def __init__(self, devices: int = 2, *, pcie_delay_s: float = 0.0) -> None:
        for name in dir(pynvml):
            if name.startswith("NVML_"):
                setattr(self, name, getattr(pynvml, name))
        self.devices = [FakeDevice(i) for i in range(devices)]
        self.pcie_delay_s = pcie_delay_s
        self.calls: Counter[str] = Counter()
        self.inits = 0
        self.shutdowns = 0
        self._faults: dict[tuple[str, int | None], int] = {}
        self._lost: set[int] = set()
        self._lock = threading.Lock()

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

    def _enter(self, function: str, handle: FakeHandle | None = None) -> FakeDevice | None:
        with self._lock:
            self.calls[function] += 1
        index = handle.index if handle is not None else None
        if index is not None and index in self._lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        code = self._faults.get((function, index), self._faults.get((function, None)))
        if code is not None:
            raise pynvml.NVMLError(code)
        return self.devices[index] if index is not None else None

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

    # -- per tick

    def nvmlDeviceGetUtilizationRates(self, handle: FakeHandle) -> Any:
        d = self._device("nvmlDeviceGetUtilizationRates", handle)
        return SimpleNamespace(gpu=d.util, memory=d.mem_util)

    def nvmlDeviceGetMemoryInfo(self, handle: FakeHandle) -> Any:
        d = self._device("nvmlDeviceGetMemoryInfo", handle)
        return SimpleNamespace(total=d.mem_total, used=d.mem_used, free=d.mem_total - d.mem_used)

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

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeHandle) -> list[Any]:
        d = self._device("nvmlDeviceGetComputeRunningProcesses", handle)
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in d.compute]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: FakeHandle) -> list[Any]:
        d = self._device("nvmlDeviceGetGraphicsRunningProcesses", handle)
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in d.graphics]

    def nvmlDeviceGetPcieThroughput(self, handle: FakeHandle, counter: int) -> int:
        d = self._device("nvmlDeviceGetPcieThroughput", handle)
        if self.pcie_delay_s:
            time.sleep(self.pcie_delay_s)
        return d.pcie_tx_kib if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES else d.pcie_rx_kib
