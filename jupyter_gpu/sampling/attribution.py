"""Which Jupyter kernel (and notebook) holds which GPU memory.

The server's event loop owns kernel and session state: every few seconds it builds a
``KernelMap`` (kernel pid -> kernel id and notebook path) and hands the sampler an immutable copy.
The sampler thread then walks each GPU process's parents with psutil: a process that is a kernel,
or runs under one (a torchrun worker started from a notebook cell), is attributed to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

import psutil

from jupyter_gpu.sampling.records import DeviceSample, ProcessSample


@dataclass(frozen=True, slots=True)
class KernelRef:
    """A kernel of this server and the notebook of its session (``None`` without a session).

    ``last_activity_ts`` (Unix seconds) and ``busy`` are the kernel manager's view when the map
    was built: the idle time of a GPU process is measured from them.
    """

    kernel_id: str
    notebook: str | None
    last_activity_ts: float | None = None
    busy: bool = False


@dataclass(frozen=True, slots=True)
class IdlePolicy:
    """When a kernel counts as an idle holder of GPU memory.

    It has been idle longer than ``idle_after_s`` while its processes hold more than
    ``min_bytes`` of GPU memory in all (on every GPU together).
    """

    idle_after_s: float = 15 * 60.0
    min_bytes: int = 1024**3


KernelMap = Mapping[int, KernelRef]
EMPTY_KERNEL_MAP: KernelMap = MappingProxyType({})


def freeze_kernel_map(mapping: Mapping[int, KernelRef]) -> KernelMap:
    """An immutable copy, safe to hand from the event loop to the sampler thread."""
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, slots=True)
class _Lineage:
    name: str | None
    ancestors: tuple[int, ...]  # the process itself first, then its parents up to init
    seen: float


class ProcessAnnotator:
    """Adds process names and kernel attribution to the processes of each device sample.

    What psutil says about a pid (its name and parents) is cached for ``ttl_s`` seconds, so a
    tick costs a dictionary lookup per process; a process that is gone gets ``name=None``.
    """

    def __init__(
        self,
        ttl_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        idle: IdlePolicy | None = None,
    ) -> None:
        self._ttl_s = ttl_s
        self._clock = clock
        self._wall_clock = wall_clock
        self.idle = idle or IdlePolicy()
        self._cache: dict[int, _Lineage] = {}
        self.kernel_map: KernelMap = EMPTY_KERNEL_MAP

    def _lineage(self, pid: int, now: float) -> _Lineage:
        cached = self._cache.get(pid)
        if cached is not None and now - cached.seen < self._ttl_s:
            return cached
        try:
            proc = psutil.Process(pid)
            with proc.oneshot():
                name = proc.name()
                parents = tuple(p.pid for p in proc.parents())
            lineage = _Lineage(name, (pid, *parents), now)
        except psutil.Error:  # gone, or in another pid namespace, or not ours to see
            lineage = _Lineage(None, (pid,), now)
        self._cache[pid] = lineage
        return lineage

    def _annotate(
        self, proc: ProcessSample, now: float, wall: float, kernels: KernelMap
    ) -> ProcessSample:
        lineage = self._lineage(proc.pid, now)
        ref = next((kernels[p] for p in lineage.ancestors if p in kernels), None)
        idle_s: float | None = None
        if ref is not None and ref.last_activity_ts is not None:
            idle_s = 0.0 if ref.busy else round(max(0.0, wall - ref.last_activity_ts), 1)
        return replace(
            proc,
            name=proc.name or lineage.name,
            kernel_id=ref.kernel_id if ref else None,
            notebook=ref.notebook if ref else None,
            idle_s=idle_s,
        )

    def _flag_idle_holders(self, devices: list[DeviceSample]) -> list[DeviceSample]:
        held: dict[str, int] = {}
        for device in devices:
            for p in device.processes:
                if p.kernel_id is not None:
                    held[p.kernel_id] = held.get(p.kernel_id, 0) + (p.used_mem_bytes or 0)
        policy = self.idle
        holders = {k for k, b in held.items() if b > policy.min_bytes}
        if not holders:
            return devices
        out = []
        for device in devices:
            procs = tuple(
                replace(p, idle_holder=True)
                if p.kernel_id in holders
                and p.idle_s is not None
                and p.idle_s > policy.idle_after_s
                else p
                for p in device.processes
            )
            out.append(replace(device, processes=procs) if device.processes else device)
        return out

    def annotate(self, devices: tuple[DeviceSample, ...]) -> tuple[DeviceSample, ...]:
        """The same samples with each process's name and kernel filled in."""
        now, wall = self._clock(), self._wall_clock()
        kernels = self.kernel_map  # one read of the reference: the loop may swap it any time
        out: list[DeviceSample] = []
        live: set[int] = set()
        for device in devices:
            if not device.processes:
                out.append(device)
                continue
            procs = tuple(self._annotate(p, now, wall, kernels) for p in device.processes)
            live.update(p.pid for p in procs)
            out.append(replace(device, processes=procs))
        for pid in [p for p in self._cache if p not in live]:
            del self._cache[pid]
        return tuple(self._flag_idle_holders(out))
