"""Host CPU and memory, as the cgroup (container) limits them where it does."""

from __future__ import annotations

import time
from collections.abc import Callable

import psutil

from jupyter_gpu.host.cgroup import CgroupReader, affinity_cpu_count
from jupyter_gpu.readings.records import HostSample


class HostReader:
    """Reads host CPU and memory; keeps the previous CPU reading to compute a percentage.

    With a cgroup CPU quota, ``cpu_pct`` is the cgroup's CPU time over the interval as a share
    of its quota; without one, the busy share of the CPUs in this process's affinity mask
    (psutil). The first reading has no interval, so its ``cpu_pct`` is ``None``.
    """

    def __init__(
        self,
        cgroup: CgroupReader | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cgroup = cgroup if cgroup is not None else CgroupReader()
        self._clock = clock
        self._affinity = affinity_cpu_count()
        self._cpus: list[int] | None = None
        try:
            self._cpus = sorted(psutil.Process().cpu_affinity() or [])
        except (AttributeError, psutil.Error):  # not on Linux: use every CPU
            self._cpus = None
        self._last_usage: tuple[float, float] | None = None
        self._last_cpu_times: dict[int, tuple[float, float]] | None = None

    def _psutil_cpu_pct(self) -> float | None:
        """Busy share of this process's CPUs since the last call, from per-CPU time counters.

        Computed from our own previous reading rather than ``psutil.cpu_percent``, whose
        baseline is shared by every caller in the process.
        """
        times = psutil.cpu_times(percpu=True)
        cpus = [i for i in self._cpus if i < len(times)] if self._cpus else range(len(times))
        busy = total = 0.0
        current: dict[int, tuple[float, float]] = {}
        for i in cpus:
            t = times[i]
            idle = t.idle + getattr(t, "iowait", 0.0)
            current[i] = (sum(t), idle)
        last, self._last_cpu_times = self._last_cpu_times, current
        if last is None:
            return None
        for i, (all_time, idle) in current.items():
            if i in last:
                total += all_time - last[i][0]
                busy += (all_time - last[i][0]) - (idle - last[i][1])
        return round(min(100.0, max(0.0, 100.0 * busy / total)), 1) if total > 0 else None

    def read(self) -> HostSample:
        """One reading (a few file reads; under a millisecond)."""
        limits = self._cgroup.read()
        cpu_count = float(self._affinity)
        if limits.cpu_quota is not None:
            cpu_count = min(cpu_count, limits.cpu_quota)
        cpu_pct: float | None
        if limits.cpu_quota is not None and limits.cpu_usage_s is not None:
            now = self._clock()
            last, self._last_usage = self._last_usage, (now, limits.cpu_usage_s)
            cpu_pct = None
            if last is not None and now > last[0]:
                busy = (limits.cpu_usage_s - last[1]) / (now - last[0])
                cpu_pct = round(min(100.0, max(0.0, 100.0 * busy / cpu_count)), 1)
        else:
            cpu_pct = self._psutil_cpu_pct()

        vm = psutil.virtual_memory()
        if limits.mem_limit_bytes is not None and limits.mem_limit_bytes < vm.total:
            used = limits.mem_used_bytes
            return HostSample(
                cpu_pct=cpu_pct,
                cpu_count=round(cpu_count, 2),
                mem_used_bytes=used if used is not None else int(vm.total - vm.available),
                mem_total_bytes=limits.mem_limit_bytes,
                mem_limit_source="cgroup",
            )
        return HostSample(
            cpu_pct=cpu_pct,
            cpu_count=round(cpu_count, 2),
            mem_used_bytes=int(vm.total - vm.available),
            mem_total_bytes=int(vm.total),
            mem_limit_source="host",
        )
