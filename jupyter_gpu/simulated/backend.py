"""Synthetic GPUs with plausible, moving load: for demos, UI tests and load tests without a GPU.

Everything it serves is labelled ``simulated`` (the backend name, ``simulated: true``, and each
device's name starts with "Simulated"). Each device runs a made-up training job in a loop: idle,
loading (memory ramps up, PCIe busy), training (utilization high, with a short dip for an
evaluation every 15 s), teardown. Power follows utilization and temperature follows power with a
lag, as on a real GPU. If the sampler knows the pids of this server's kernels, the simulated
devices report those kernels as their processes, so kernel attribution can be shown end to end;
a kernel's own reading (``read_once``) lists the same kernels and starts its timeline where its
server's is, so its ``%gpu`` agrees with the sidebar.
Faults given as ``SimulatedFault`` (``faults.py``) show a lost GPU, a failing one or a field that
is "Not Supported", on a schedule, each labelled simulated in its message.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import MappingProxyType

from jupyter_gpu.readings.backend import Backend
from jupyter_gpu.readings.records import (
    BackendInfo,
    BackendName,
    DeviceInfo,
    GroupReading,
    ProcessSample,
)
from jupyter_gpu.readings.topology import Topology
from jupyter_gpu.simulated.faults import (
    SIMULATED_ERROR_MESSAGE,
    SIMULATED_LOST_MESSAGE,
    SIMULATED_NOT_SUPPORTED,
    SimulatedFault,
)
from jupyter_gpu.simulated.topology import simulated_topology

SIM_NAME = "Simulated NVIDIA H200"
SIM_MEM_TOTAL_BYTES = 150_754_820_096  # what NVML reports for an H200 (141 GiB usable)
SIM_POWER_LIMIT_W = 700.0
_IDLE_POWER_W = 75.0
_CONTEXT_BYTES = 530_000_000  # a CUDA context's footprint before any tensor
_AMBIENT_C = 30.0
_THERMAL_TAU_S = 20.0


def _power_w(util_pct: float) -> float:
    """Power draw that goes with a utilization: idle power up to 92 % of the limit."""
    return _IDLE_POWER_W + (SIM_POWER_LIMIT_W * 0.92 - _IDLE_POWER_W) * util_pct / 100.0


class SimulatedBackend(Backend):
    """``count`` synthetic H200-like devices (1 to 16).

    Args:
        count: how many devices.
        seed: seeds the noise, so two backends with one seed agree.
        clock: monotonic seconds; tests pass a fake clock to step time.
        pids: returns pids to show as GPU processes (kernel ``i`` on device ``i % count``).
        faults: faults to show, timed from the start of the timeline.
        elapsed_s: how far into their timeline the jobs are when the backend opens (default
            0: they start now). A server's kernels open theirs where the server's is
            (``JUPYTER_GPU_SIMULATED_EPOCH``), so ``%gpu`` shows what the sidebar shows.

    Raises:
        ValueError: ``count`` out of 1 to 16, or a fault on a device that does not exist.
    """

    name: BackendName = "simulated"

    def __init__(
        self,
        count: int = 2,
        *,
        seed: int = 0,
        clock: Callable[[], float] = time.monotonic,
        pids: Callable[[], Sequence[int]] | None = None,
        faults: Sequence[SimulatedFault] = (),
        elapsed_s: float = 0.0,
    ) -> None:
        if not 1 <= count <= 16:
            raise ValueError(f"simulated device count must be 1 to 16, got {count}")
        for fault in faults:
            if fault.gpu is not None and fault.gpu >= count:
                raise ValueError(
                    f"simulated fault {fault.spec or fault.kind!r} is on GPU {fault.gpu}, but "
                    f"there are only {count} simulated GPUs (0 to {count - 1})"
                )
        self._faults = tuple(faults)
        self._count = count
        self._clock = clock
        self._pids = pids
        self._rng = random.Random(seed)  # noqa: S311 (noise for a demo, not a secret)
        self._start = clock() - max(0.0, elapsed_s)  # the timeline's origin
        # Each device runs its own job: different period, phase and memory footprint.
        self._period_s = [150.0 + 37.0 * i for i in range(count)]
        self._offset_s = [self._rng.uniform(0, p) for p in self._period_s]
        self._job_fraction = [self._rng.uniform(0.35, 0.85) for _ in range(count)]
        self._temperature_c = [_AMBIENT_C + 5.0 for _ in range(count)]
        self._last_util: dict[int, float] = {}  # what the last fast read showed, for GPM
        self._last_t = [clock()] * count
        if elapsed_s >= 1.0:  # a server's own backend opens a few ms into its timeline
            self._settle_temperatures(elapsed_s)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        # Each group of readings/catalog.py it simulates, and how.
        self._readers: dict[str, Callable[[int], GroupReading | None]] = {
            "fast": self._read_fast,
            "gpm": self._read_gpm,
            "pcie": self._read_pcie,
            "nvlink": self._read_nvlink,
        }
        self._devices = tuple(
            DeviceInfo(
                index=i,
                uuid=f"GPU-51300000-0000-4000-8000-{i:012d}",
                name=SIM_NAME,
                mem_total_bytes=SIM_MEM_TOTAL_BYTES,
                power_limit_w=SIM_POWER_LIMIT_W,
                pci_bus_id=f"00000000:{0x18 + i:02X}:00.0",
            )
            for i in range(count)
        )

    def info(self) -> BackendInfo:
        return BackendInfo(
            backend="simulated",
            simulated=True,
            reason=None,
            driver_version="simulated",
            cuda_driver_version=None,
            devices=self._devices,
        )

    def _phase(self, index: int, t: float) -> tuple[str, float]:
        """The job's phase on a device at ``t`` and how far into that phase (0 to 1)."""
        period = self._period_s[index]
        x = ((t + self._offset_s[index]) % period) / period
        for name, start, end in (
            ("idle", 0.0, 0.1),
            ("loading", 0.1, 0.2),
            ("training", 0.2, 0.9),
            ("teardown", 0.9, 1.0),
        ):
            if x < end:
                return name, (x - start) / (end - start)
        return "teardown", 1.0

    def _load(self, index: int, t: float) -> tuple[float, int, float]:
        """Utilization %, memory used (bytes) and PCIe traffic (bytes/s) at ``t``."""
        phase, progress = self._phase(index, t)
        job_bytes = int(self._job_fraction[index] * (SIM_MEM_TOTAL_BYTES - _CONTEXT_BYTES))
        noise = self._rng.gauss(0.0, 2.0)
        if phase == "idle":
            return max(0.0, 1.0 + noise / 2), _CONTEXT_BYTES, 0.0
        if phase == "loading":
            util = 10.0 + 30.0 * progress + noise
            pcie = 12e9 * (0.6 + 0.4 * math.sin(t))
            return util, _CONTEXT_BYTES + int(job_bytes * progress), pcie
        if phase == "training":
            evaluating = (t + self._offset_s[index]) % 15.0 < 2.0
            util = (22.0 if evaluating else 94.0) + noise
            return util, _CONTEXT_BYTES + job_bytes, 0.4e9
        return 0.0, _CONTEXT_BYTES + int(job_bytes * (1.0 - progress)), 0.0

    def read_group(self, group: str, index: int) -> GroupReading | None:
        """One device's simulated readings of ``group``; a ``hang`` fault blocks every group."""
        read = self._readers.get(group)
        if read is None:
            return None
        if self._hangs(index):
            self._hang(index)
        return read(index)

    def topology(self) -> Topology:
        """The simulated GPUs as on an HGX H200 board (``simulated/topology.py``), labelled so."""
        return simulated_topology(self._count, SIM_NAME)

    def _read_fast(self, index: int) -> GroupReading:
        with self._lock:  # the sampler's workers may overlap (a hung read returning late)
            now = self._clock()
            t = now - self._start
            dt = max(0.0, now - self._last_t[index])
            self._last_t[index] = now
            pids = list(self._pids()) if self._pids is not None else []
            reading = self._reading(self._devices[index], t, dt, pids)
        return self._with_faults(index, reading, t) if self._faults else reading

    def _hangs(self, index: int) -> bool:
        t = self._clock() - self._start
        return any(f.kind == "hang" for f in self._active_faults(index, t))

    def _hang(self, index: int) -> None:
        """Block as a hung NVML call does, until the fault ends or the backend closes."""
        while self._hangs(index) and not self._closed.wait(0.05):
            pass

    def close(self) -> None:
        """Release reads blocked by a ``hang`` fault."""
        self._closed.set()

    def _heat(self, index: int, power_w: float, dt: float) -> None:
        """Temperature approaches its steady state for this power with a thermal lag."""
        target = _AMBIENT_C + 0.055 * power_w
        alpha = 1.0 - math.exp(-dt / _THERMAL_TAU_S) if dt else 0.0
        self._temperature_c[index] += (target - self._temperature_c[index]) * alpha

    def _settle_temperatures(self, elapsed_s: float) -> None:
        """Warm the devices as if read every second of the last 5 thermal time constants.

        A backend opened into a running timeline (a kernel's, beside its server's) then reads
        about the temperature the running one does, not a cold start's.
        """
        t = max(0.0, elapsed_s - 5 * _THERMAL_TAU_S)
        while t < elapsed_s:
            t = min(elapsed_s, t + 1.0)
            for i in range(self._count):
                util = min(100.0, max(0.0, self._load(i, t)[0]))
                self._heat(i, _power_w(util), 1.0)

    def _reading(self, info: DeviceInfo, t: float, dt: float, pids: list[int]) -> GroupReading:
        i = info.index
        util, used, _ = self._load(i, t)
        util = min(100.0, max(0.0, util))
        self._last_util[i] = util
        power = round(_power_w(util) + self._rng.gauss(0.0, 4.0), 1)
        self._heat(i, power, dt)
        mine = [pid for k, pid in enumerate(pids) if k % self._count == i]
        per_process = (used - _CONTEXT_BYTES) // len(mine) + _CONTEXT_BYTES if mine else 0
        values: dict[str, float | None] = {
            "util_pct": round(util, 1),
            "mem_util_pct": round(util * 0.45, 1),
            "mem_used_bytes": used,
            "mem_total_bytes": info.mem_total_bytes,
            "power_w": power,
            "power_limit_w": info.power_limit_w,
            "temperature_c": round(self._temperature_c[i], 1),
            "sm_clock_mhz": 1980 if util > 5.0 else 345,
        }
        return GroupReading(
            values,
            processes=tuple(
                ProcessSample(pid=pid, name=None, used_mem_bytes=per_process) for pid in mine
            ),
        )

    def _active_faults(self, index: int, t: float) -> list[SimulatedFault]:
        return [f for f in self._faults if f.gpu == index and f.active(t)]

    def _with_faults(self, index: int, reading: GroupReading, t: float) -> GroupReading:
        """The fast reading as the device's active faults make it look (as NVML's errors would).

        A field taken away by an ``unsupported`` fault is unavailable whichever group reads
        it: the merge keeps it ``None`` (``readings/merge.py``).
        """
        active = self._active_faults(index, t)
        kinds = {f.kind for f in active} - {"hang"}  # a hang ended when the read returned
        if not kinds:
            return reading
        if "lost" in kinds or "error" in kinds:
            lost = "lost" in kinds
            return GroupReading(
                state="lost" if lost else "error",
                error=SIMULATED_LOST_MESSAGE if lost else SIMULATED_ERROR_MESSAGE,
            )
        fields = sorted({f.field for f in active if f.field is not None})
        values = {k: None if k in fields else v for k, v in reading.values.items()}
        processes = () if "processes" in fields else reading.processes
        reasons = MappingProxyType(dict.fromkeys(fields, SIMULATED_NOT_SUPPORTED))
        return replace(reading, values=values, processes=processes, unavailable=reasons)

    def _read_gpm(self, index: int) -> GroupReading:
        """SM/tensor/DRAM activity that goes with the device's job, as on an H200.

        Training: SM active about 83 % of utilization, tensor active about 77 % (bf16 matrix
        products), occupancy in the teens, DRAM 15 to 25 %; loading keeps the SMs busy without
        tensor cores; idle is near 0. (One H200 running bf16 matmuls read util 100 %, SM 78 %,
        occupancy 14 %, tensor 72 %, DRAM 18 %.)
        """
        with self._lock:
            t = self._clock() - self._start
            util = self._last_util.get(index)
            if util is None:
                util = min(100.0, max(0.0, self._load(index, t)[0]))
            phase, _ = self._phase(index, t)
            tensor_share = 0.77 if phase == "training" and util > 50 else 0.05
            busy = util > 5
            values = {
                "sm_active_pct": util * 0.83,
                "sm_occupancy_pct": util * 0.15 + self._rng.uniform(0.0, 1.5) if busy else 0.0,
                "tensor_active_pct": util * tensor_share,
                "dram_bw_pct": util * 0.19 + self._rng.uniform(0.0, 3.0) if busy else 0.2,
            }
        rounded: dict[str, float | None] = {
            k: round(min(100.0, max(0.0, v)), 1) for k, v in values.items()
        }
        return GroupReading(MappingProxyType(rounded))

    def _read_pcie(self, index: int) -> GroupReading:
        """PCIe traffic that goes with the device's job."""
        t = self._clock() - self._start
        with self._lock:
            _, _, pcie = self._load(index, t)
        tx: float | None = round(pcie * 0.05, 0)
        rx: float | None = round(pcie, 0)
        for fault in self._active_faults(index, t):
            if fault.kind == "hang":  # it ended while this read waited: the read answers
                continue
            if fault.kind != "unsupported" or fault.field == "pcie_tx_bytes_per_s":
                tx = None
            if fault.kind != "unsupported" or fault.field == "pcie_rx_bytes_per_s":
                rx = None
        return GroupReading({"pcie_tx_bytes_per_s": tx, "pcie_rx_bytes_per_s": rx})

    def _read_nvlink(self, index: int) -> GroupReading:
        """NVLink traffic of data-parallel training: each step all-reduces the gradients.

        A ring all-reduce sends, and receives, 2(n-1)/n of the gradients per step: up to
        about 100 GB/s each way while training here, pulsing with the steps, nothing while it
        evaluates, is idle or alone (one GPU has no peer); a burst while loading (the weights
        broadcast). Drawn from the timeline alone, never from the noise of the other readings.
        """
        t = self._clock() - self._start
        phase, _ = self._phase(index, t)
        share = 2.0 * (self._count - 1) / self._count
        rate = 0.0
        if phase == "training" and (t + self._offset_s[index]) % 15.0 >= 2.0:
            rate = 50e9 * share * (0.8 + 0.2 * math.sin(2.0 * math.pi * t))
        elif phase == "loading":
            rate = 10e9 * share
        sent = round(rate, 0)
        return GroupReading({"nvlink_tx_bytes_per_s": sent, "nvlink_rx_bytes_per_s": sent})
