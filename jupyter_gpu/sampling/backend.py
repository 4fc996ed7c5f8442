"""The interface every GPU backend implements, and the no-GPU backend.

A backend reads the GPUs; the sampler adds the host, the compile caches and which kernel owns
each process. Backends never raise from ``read``: a failed read is a value on the record.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping

from jupyter_gpu.sampling.records import BackendInfo, BackendName, DeviceSample, GpmReading


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

        The sampler calls it from a worker thread with a deadline (``deadline.py``): a call
        that hangs makes that device "not responding" and never blocks the others' reads or
        the tick. Calls for different devices may overlap (after a hung one returns late).
        """
        raise NotImplementedError(f"{type(self).__name__} has no devices to read")

    def read_slow(self) -> Mapping[int, tuple[float | None, float | None]]:
        """The slow metrics, by device index: ``(pcie_tx_bytes_per_s, pcie_rx_bytes_per_s)``.

        About 21 ms per call on an H200 with NVML, so the sampler runs this on its own slower
        cadence. Never raises; the default has none.
        """
        return {}

    def read_gpm(self) -> Mapping[int, GpmReading]:
        """SM/tensor/DRAM activity by device index, averaged since the previous call.

        NVML's GPM (``gpm.py``): 0.5 to 3.4 ms per GPU on an H200, so the sampler runs it on its
        own cadence. The first call only primes the window (devices left out); a device without
        GPM has every field unavailable. Never raises; the default has none.
        """
        return {}

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
