"""The interface every GPU backend implements, and the no-GPU backend.

A backend reads the GPUs; the sampler adds the host, the compile caches and which kernel owns
each process. Backends never raise from ``read``: a failed read is a value on the record.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping

from jupyter_gpu.readings.records import BackendInfo, BackendName, DeviceSample, GpmReading


class Backend(abc.ABC):
    """Reads the GPUs. Open it once, ``read`` it every tick, ``close`` it at the end."""

    name: BackendName

    @abc.abstractmethod
    def info(self) -> BackendInfo:
        """Static facts: which backend, whether simulated, why there is no GPU, the devices."""

    def read(self) -> tuple[DeviceSample, ...]:
        """One read of every device (fast metrics only), in order. Never raises."""
        return tuple(self.read_device(d.index) for d in self.info().devices)

    def read_device(self, index: int) -> DeviceSample:
        """One device's fast metrics. Never raises.

        The sampler calls it from the device's own worker thread with a deadline
        (``deadline.py``): a call that hangs makes that device "not responding" and never
        blocks the others' reads or the tick. Calls for different devices run at once, and so
        do the fast, GPM and slow reads of one device (each kind has its own workers).
        """
        raise NotImplementedError(f"{type(self).__name__} has no devices to read")

    def read_slow_device(self, index: int) -> tuple[float | None, float | None] | None:
        """One device's slow metrics: ``(pcie_tx_bytes_per_s, pcie_rx_bytes_per_s)``.

        About 21 ms per call on an H200 with NVML, so the sampler reads them on their own slower
        cadence, each device in its own thread with a deadline. ``None``: nothing read this
        time. Never raises; the default has none.
        """
        return None

    def read_gpm_device(self, index: int) -> GpmReading | None:
        """One device's SM/tensor/DRAM activity, averaged since its previous call.

        NVML's GPM (``gpm.py``): 0.5 to 3.4 ms per GPU on an H200, so the sampler reads it on its
        own cadence, each device in its own thread with a deadline. The first call only primes
        the window (``None``); a device without GPM has every field unavailable. Never raises;
        the default has none.
        """
        return None

    def read_slow(self) -> Mapping[int, tuple[float | None, float | None]]:
        """``read_slow_device`` of every device in turn, by index (no deadline: tests, demos)."""
        readings = {d.index: self.read_slow_device(d.index) for d in self.info().devices}
        return {i: r for i, r in readings.items() if r is not None}

    def read_gpm(self) -> Mapping[int, GpmReading]:
        """``read_gpm_device`` of every device in turn, by index (no deadline: tests, demos)."""
        readings = {d.index: self.read_gpm_device(d.index) for d in self.info().devices}
        return {i: r for i, r in readings.items() if r is not None}

    def close(self) -> None:  # noqa: B027 (an optional hook: most backends hold nothing)
        """Release what ``open`` took (e.g. ``nvmlShutdown``). Safe to call twice."""


class NoGpuBackend(Backend):
    """No usable GPU: serves no devices and says why (``reason``)."""

    name: BackendName = "none"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def info(self) -> BackendInfo:
        return BackendInfo(backend="none", simulated=False, reason=self.reason)

    def read(self) -> tuple[DeviceSample, ...]:
        return ()
