"""Which Jupyter kernel (and notebook) holds which GPU memory.

The server's event loop owns kernel and session state: every few seconds it builds a
``KernelMap`` (kernel pid -> kernel id and notebook path) and hands the sampler an immutable copy.
The sampler thread then walks each GPU process's parents with psutil: a process that is a kernel,
or runs under one (a torchrun worker started from a notebook cell), is attributed to it.

The sample is built once per tick and served to every client of this server, who are all its
user (or the hub's admins): so what other users run is hidden here, at the source, not per
request. Another user's process is a GPU and an amount of memory, never a pid, name or command
line, unless the admin option ``JupyterGpu.show_other_processes`` says otherwise.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

import psutil

from jupyter_gpu.readings.records import DeviceSample, ProcessSample, ProcessScope
from jupyter_gpu.sampling.process_facts import (
    ProcessFacts,
    ProcessId,
    read_process,
    same_process,
    start_time_s,
)


@dataclass(frozen=True, slots=True)
class KernelRef:
    """A kernel of this server and the notebook of its session (``None`` without a session).

    ``last_activity_ts`` (Unix seconds) and ``busy`` are the kernel manager's view when the map
    was built: the idle time of a GPU process is measured from them. ``started_s`` is the kernel
    process's start time when the server first saw it (``process_facts.py``): a process at the
    kernel's pid that started at another time is not that kernel (``None``: the pid decides).
    """

    kernel_id: str
    notebook: str | None
    last_activity_ts: float | None = None
    busy: bool = False
    started_s: float | None = None


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


def default_root_pid() -> int:
    """The process whose tree is "this server": this one, or in a kernel the server that ran it.

    jupyter_client sets ``JPY_PARENT_PID`` in a kernel's environment, so a kernel's own reading
    (``%gpu``, ``%gpu --watch``) counts the user's other kernels as theirs, as the server does.
    """
    parent = os.environ.get("JPY_PARENT_PID", "")
    return int(parent) if parent.isdigit() and int(parent) > 0 else os.getpid()


def kernel_pids_of_server(server_pid: int) -> list[int]:
    """The pids of the local kernels ``server_pid`` started, sorted.

    jupyter_client's launcher puts ``JPY_PARENT_PID`` (the server's pid) in each kernel's
    environment, so a kernel is a child of the server whose environment names it. A kernel
    lists its server's kernels this way (for the simulated backend, which shows them as its GPU
    processes); the server asks its kernel manager (``KernelMap``), which names the same ones.
    """
    try:
        children = psutil.Process(server_pid).children()
    except psutil.Error:
        return []
    pids = []
    for child in children:
        try:
            if child.environ().get("JPY_PARENT_PID") == str(server_pid):
                pids.append(child.pid)
        except psutil.Error:  # ended since, or not ours to read
            continue
    return sorted(pids)


PID_NS_INIT_INODE = 0xEFFFFFFC
"""The inode of the host's (initial) pid namespace, ``/proc/self/ns/pid``: fixed in Linux."""


def in_own_pid_namespace(proc_root: str = "/proc") -> bool | None:
    """Whether this process runs in a pid namespace other than the host's (a container's).

    ``None`` when it cannot be told (no ``/proc``, not Linux).
    """
    try:
        return Path(proc_root, "self", "ns", "pid").stat().st_ino != PID_NS_INIT_INODE
    except OSError:
        return None


def unattributable_reason(count: int, in_namespace: bool | None) -> str:
    """Why ``count`` GPU processes cannot be attributed, in a sentence for people."""
    what = "1 process" if count == 1 else f"{count} processes"
    if in_namespace:
        return (
            f"Not attributable from inside this container: NVML lists {what} whose pids match "
            "no process visible here. This server runs in its own pid namespace and the driver "
            "reports pids from outside it (host pids). They may be this container's own "
            "processes or another container's: run the container in the host's pid namespace "
            "(hostPID) or on a driver that reports namespace pids (R580 does) to attribute them."
        )
    return (
        f"Not attributable: NVML lists {what} whose pids match no process visible here "
        "(ended since, or /proc is mounted with hidepid)."
    )


@dataclass(frozen=True, slots=True)
class _Seen:
    """A process's facts and when (monotonic seconds) they were read."""

    facts: ProcessFacts
    at: float


class ProcessAnnotator:
    """Names the processes of each device sample, attributes them to kernels, hides others'.

    A process is this server's (``scope="server"``) when it runs under ``root_pid`` (this
    Jupyter server: its kernels, terminals and what they start) or under one of its kernels, or,
    with ``own_uid_processes``, as this server's unix user (not root: every root service shares
    that uid, so it says nothing about who). Other visible processes are ``"other"``: with
    ``show_other_processes`` off (the default) a GPU's other processes become one row with no
    pid, name or command line, only their summed memory and count. Pids that match no visible
    process become one ``"unattributable"`` row per GPU with a reason.

    What psutil says about a process (its name, parents and uid) is cached for ``ttl_s``
    seconds under its identity, pid and start time: a tick costs one read of each process's
    start time, and a pid that another process took meanwhile (another user's, say) is looked
    up afresh, never shown with the old one's name and owner. Kernels and the server itself
    are matched by pid and start time too.

    Args:
        ttl_s: how long a pid's psutil facts are reused.
        clock: monotonic seconds (tests pass their own).
        root_pid: the process whose descendants are this server's (default:
            ``default_root_pid()``).
        uid: this server's unix user (default: this process's real uid).
        show_other_processes: list other users' processes with pid and name (an admin option).
        own_uid_processes: count processes of this server's (non-root) unix user as its own.
        in_namespace: whether this server runs in its own pid namespace (default: looked up),
            for the reason of the unattributable row.
        start_time: a pid's start time now (default: ``process_facts.start_time_s``; tests
            pass their own to play a reused pid).
        describe: a pid's facts now (default: ``process_facts.read_process``).
    """

    def __init__(
        self,
        ttl_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        idle: IdlePolicy | None = None,
        *,
        root_pid: int | None = None,
        uid: int | None = None,
        show_other_processes: bool = False,
        own_uid_processes: bool = True,
        in_namespace: bool | None = None,
        start_time: Callable[[int], float | None] = start_time_s,
        describe: Callable[[int], ProcessFacts] = read_process,
    ) -> None:
        self._ttl_s = ttl_s
        self._clock = clock
        self._wall_clock = wall_clock
        self.idle = idle or IdlePolicy()
        self._start_time = start_time
        self._describe = describe
        self._cache: dict[int, _Seen] = {}
        self.kernel_map: KernelMap = EMPTY_KERNEL_MAP
        self.root_pid = default_root_pid() if root_pid is None else root_pid
        self._root: ProcessId = (self.root_pid, start_time(self.root_pid))
        own_uid = os.getuid() if uid is None else uid
        self._own_uid = own_uid if own_uid_processes and own_uid != 0 else None
        self.show_other_processes = show_other_processes
        self._in_namespace = in_own_pid_namespace() if in_namespace is None else in_namespace

    def _facts(self, pid: int, now: float) -> ProcessFacts:
        """``pid``'s facts: the cached ones while they are young and still that process's."""
        cached = self._cache.get(pid)
        if (
            cached is not None
            and now - cached.at < self._ttl_s
            and cached.facts.started_s == self._start_time(pid)
        ):
            return cached.facts
        facts = self._describe(pid)
        self._cache[pid] = _Seen(facts, now)
        return facts

    def kernel_pids(self) -> list[int]:
        """The kernel map's pids whose process is still the kernel it names (sorted)."""
        kernels = self.kernel_map
        return sorted(
            pid
            for pid, ref in kernels.items()
            if same_process(ref.started_s, self._start_time(pid))
        )

    def _annotate(
        self, proc: ProcessSample, now: float, wall: float, kernels: KernelMap
    ) -> ProcessSample:
        assert proc.pid is not None  # backends list real pids; only this class drops them
        facts = self._facts(proc.pid, now)
        if not facts.visible:
            return replace(proc, name=None, kernel_id=None, notebook=None, scope="unattributable")
        root, root_started = self._root
        ref = next(
            (
                kernels[p]
                for p, started in facts.ancestors
                if p in kernels and same_process(kernels[p].started_s, started)
            ),
            None,
        )
        idle_s: float | None = None
        if ref is not None and ref.last_activity_ts is not None:
            idle_s = 0.0 if ref.busy else round(max(0.0, wall - ref.last_activity_ts), 1)
        mine = (
            ref is not None
            or any(p == root and same_process(root_started, t) for p, t in facts.ancestors)
            or (self._own_uid is not None and facts.uid == self._own_uid)
        )
        return replace(
            proc,
            name=proc.name or facts.name,
            kernel_id=ref.kernel_id if ref else None,
            notebook=ref.notebook if ref else None,
            idle_s=idle_s,
            scope="server" if mine else "other",
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

    def _rows(self, procs: tuple[ProcessSample, ...]) -> tuple[ProcessSample, ...]:
        """This server's processes as they are; others' summed (unless shown); unattributable."""
        rows = [p for p in procs if p.scope == "server"]
        others = [p for p in procs if p.scope == "other"]
        if self.show_other_processes:
            rows.extend(others)
        elif others:
            rows.append(_summary(others, "other", None))
        lost = [p for p in procs if p.scope == "unattributable"]
        if lost:
            rows.append(
                _summary(
                    lost, "unattributable", unattributable_reason(len(lost), self._in_namespace)
                )
            )
        return tuple(rows)

    def annotate(self, devices: tuple[DeviceSample, ...]) -> tuple[DeviceSample, ...]:
        """The same samples with names and kernels filled in and others' processes hidden."""
        now, wall = self._clock(), self._wall_clock()
        kernels = self.kernel_map  # one read of the reference: the loop may swap it any time
        out: list[DeviceSample] = []
        live: set[int] = set()
        for device in devices:
            if not device.processes:
                out.append(device)
                continue
            procs = tuple(
                self._annotate(p, now, wall, kernels) for p in device.processes if p.pid is not None
            )
            live.update(p.pid for p in procs if p.pid is not None)
            out.append(replace(device, processes=self._rows(procs)))
        for pid in [p for p in self._cache if p not in live]:
            del self._cache[pid]
        return tuple(self._flag_idle_holders(out))


def _summary(procs: list[ProcessSample], scope: ProcessScope, reason: str | None) -> ProcessSample:
    """One row for several processes: no pid or name, their memory summed (None if none known)."""
    known = [p.used_mem_bytes for p in procs if p.used_mem_bytes is not None]
    return ProcessSample(
        pid=None,
        name=None,
        used_mem_bytes=sum(known) if known else None,
        scope=scope,
        process_count=len(procs),
        reason=reason,
    )
