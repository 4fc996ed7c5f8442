"""The interface every GPU backend implements, and the no-GPU backend.

A backend reads the GPUs; the sampler adds the host, the compile caches and which kernel owns
each process. Backends never raise from a read: a failed read is a value on the reading.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping

from jupyter_gpu.readings import catalog
from jupyter_gpu.readings.deadline import READ_NOTHING
from jupyter_gpu.readings.merge import device_record
from jupyter_gpu.readings.records import BackendInfo, BackendName, DeviceSample, GroupReading
from jupyter_gpu.readings.topology import Topology


class Backend(abc.ABC):
    """Reads the GPUs: open it once, ``read_group`` on every tick and round, then ``close`` it."""

    name: BackendName

    @abc.abstractmethod
    def info(self) -> BackendInfo:
        """Static facts: which backend, whether simulated, why there is no GPU, the devices."""

    def read_group(self, group: str, index: int) -> GroupReading | None:
        """One device's readings of one group of ``readings/catalog.py``. Never raises.

        ``None``: nothing read this time (a windowed group's first read only opens its window;
        a backend without the group). The sampler calls it from a worker thread of the device
        and group (``deadline.py``) with a deadline: a call that hangs makes that device "not
        responding" and never blocks the others' reads or the tick. Calls for different
        devices, and for different groups of one device, run at once.

        The tick group's reading (``fast``) also lists the processes and says whether the GPU
        answers (``GroupReading.state``); a backend with devices must give it.
        """
        return None

    def read_all(self, group: str) -> Mapping[int, GroupReading]:
        """``read_group`` of every device in turn, by index (no deadline: tests, demos)."""
        readings = {d.index: self.read_group(group, d.index) for d in self.info().devices}
        return {i: r for i, r in readings.items() if r is not None}

    def read(self, *groups: str) -> tuple[DeviceSample, ...]:
        """Every device's record from one read of its tick group, in order, and of ``groups``.

        No deadline and no ages: for tests and demos (the sampler reads each group through its
        own workers). ``groups`` are read after the tick group, each device in turn; a
        windowed group (GPM) that is read for the first time has only opened its window.
        """
        made = catalog.layout()
        devices = self.info().devices
        tick = self.read_all(made.tick_group.name)
        others = {name: self.read_all(name) for name in groups}
        return tuple(
            device_record(
                d,
                tick.get(d.index, READ_NOTHING),
                {name: got[d.index] for name, got in others.items() if d.index in got},
                made,
            )
            for d in devices
        )

    def topology(self) -> Topology:
        """How the GPUs are connected (``nvidia-smi topo -m``), read now; never raises.

        Read on demand (``%gpu --topology``), never on the tick. The default has no GPUs to
        connect, and says why there are none.
        """
        why = self.info().reason or f"the {self.name} backend reads no interconnect"
        return Topology((), (), f"no GPU, so no interconnect to show: {why}")

    def close(self) -> None:  # noqa: B027 (an optional hook: most backends hold nothing)
        """Release what ``open`` took (e.g. ``nvmlShutdown``). Safe to call twice."""


class NoGpuBackend(Backend):
    """No usable GPU: serves no devices and says why (``reason``)."""

    name: BackendName = "none"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def info(self) -> BackendInfo:
        return BackendInfo(backend="none", simulated=False, reason=self.reason)
