"""The CPU and memory limits of the cgroup this process runs in (v2 or v1), read from files.

Inside a container psutil reports the machine's totals; the cgroup's limits are what the user
actually has. Every reader returns ``None`` where a file is missing or unreadable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# cgroup v1 writes "no limit" as a huge number (PAGE_COUNTER_MAX * page size, about 2**63).
_V1_UNLIMITED = 1 << 62


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _stat_value(path: Path, key: str) -> int | None:
    """One ``key value`` line of a ``memory.stat``/``cpu.stat`` file."""
    text = _read(path)
    if text is None:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _v2_quota(text: str | None) -> float | None:
    """CPUs' worth of a ``cpu.max`` line (``"150000 100000"`` -> 1.5); ``None`` for ``max``."""
    fields = (text or "max").split()
    if len(fields) != 2 or fields[0] == "max":
        return None
    try:
        quota, period = int(fields[0]), int(fields[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


@dataclass(frozen=True)
class CgroupLimits:
    """What one reading of the cgroup files found (``None``: no limit or not readable)."""

    cpu_quota: float | None
    """CPUs' worth of time allowed (``cpu.max`` quota / period), ``None`` without a quota."""
    cpu_usage_s: float | None
    """CPU time the cgroup used so far, in seconds."""
    mem_limit_bytes: int | None
    """The tightest memory limit on the way from this cgroup to the root."""
    mem_used_bytes: int | None
    """Memory charged to the cgroup less inactive file cache (what ``docker stats`` shows)."""


class CgroupReader:
    """Finds this process's cgroup once, then reads its limits and usage on demand.

    Args:
        root: where cgroupfs is mounted.
        proc_cgroup: the ``/proc/self/cgroup`` file that names this process's cgroup.
    """

    def __init__(
        self,
        root: Path = Path("/sys/fs/cgroup"),
        proc_cgroup: Path = Path("/proc/self/cgroup"),
    ) -> None:
        self.version: int | None = None
        self._cpu_dirs: list[Path] = []
        self._mem_dirs: list[Path] = []
        self._acct_dir: Path | None = None
        own = self._own_paths(proc_cgroup)
        if (root / "cgroup.controllers").exists():
            self.version = 2
            dirs = self._chain(root, own.get("", "/"))
            self._cpu_dirs = self._mem_dirs = dirs
            self._acct_dir = dirs[0] if dirs else None
        elif (root / "memory").is_dir() or (root / "cpu").is_dir():
            self.version = 1
            self._mem_dirs = self._chain(root / "memory", own.get("memory", "/"))
            cpu_root = root / "cpu" if (root / "cpu").is_dir() else root / "cpu,cpuacct"
            self._cpu_dirs = self._chain(cpu_root, own.get("cpu", own.get("cpu,cpuacct", "/")))
            acct_root = root / "cpuacct" if (root / "cpuacct").is_dir() else cpu_root
            acct = self._chain(acct_root, own.get("cpuacct", own.get("cpu,cpuacct", "/")))
            self._acct_dir = acct[0] if acct else None

    @staticmethod
    def _own_paths(proc_cgroup: Path) -> dict[str, str]:
        """Controller -> path of this process's cgroup (v2's single hierarchy is ``""``)."""
        paths: dict[str, str] = {}
        for line in (_read(proc_cgroup) or "").splitlines():
            parts = line.split(":", 2)
            if len(parts) == 3:
                for controller in parts[1].split(","):
                    paths[controller] = parts[2]
        return paths

    @staticmethod
    def _chain(mount: Path, own: str) -> list[Path]:
        """This cgroup's directory and its ancestors up to the mount, innermost first.

        In a container with its own cgroup namespace the path is ``/`` and the mount is the
        container's cgroup; without one the path may not exist under the mount, so fall back.
        """
        chain: list[Path] = []
        here = mount / own.strip("/") if own.strip("/") else mount
        if not here.is_dir():
            here = mount
        while True:
            chain.append(here)
            if here == mount or mount not in here.parents:
                break
            here = here.parent
        return chain

    def read(self) -> CgroupLimits:
        """Read the limits and usage now (a few small file reads)."""
        if self.version == 2:
            return self._read_v2()
        if self.version == 1:
            return self._read_v1()
        return CgroupLimits(None, None, None, None)

    def _read_v2(self) -> CgroupLimits:
        quota: float | None = None
        limit: int | None = None
        for d in self._cpu_dirs:
            q = _v2_quota(_read(d / "cpu.max"))
            if q is not None:
                quota = q if quota is None else min(quota, q)
        for d in self._mem_dirs:
            value = _read(d / "memory.max")
            if value is not None and value != "max" and value.isdigit():
                limit = int(value) if limit is None else min(limit, int(value))
        usage_s: float | None = None
        used: int | None = None
        if self._acct_dir is not None:
            usec = _stat_value(self._acct_dir / "cpu.stat", "usage_usec")
            usage_s = usec / 1e6 if usec is not None else None
            current = _read_int(self._acct_dir / "memory.current")
            inactive = _stat_value(self._acct_dir / "memory.stat", "inactive_file") or 0
            used = max(0, current - inactive) if current is not None else None
        return CgroupLimits(quota, usage_s, limit, used)

    def _read_v1(self) -> CgroupLimits:
        quota: float | None = None
        limit: int | None = None
        for d in self._cpu_dirs:
            q, p = _read_int(d / "cpu.cfs_quota_us"), _read_int(d / "cpu.cfs_period_us")
            if q is not None and p and q > 0:
                quota = q / p if quota is None else min(quota, q / p)
        for d in self._mem_dirs:
            value = _read_int(d / "memory.limit_in_bytes")
            if value is not None and value < _V1_UNLIMITED:
                limit = value if limit is None else min(limit, value)
        usage_ns = _read_int(self._acct_dir / "cpuacct.usage") if self._acct_dir else None
        used: int | None = None
        if self._mem_dirs:
            current = _read_int(self._mem_dirs[0] / "memory.usage_in_bytes")
            inactive = _stat_value(self._mem_dirs[0] / "memory.stat", "total_inactive_file") or 0
            used = max(0, current - inactive) if current is not None else None
        return CgroupLimits(quota, usage_ns / 1e9 if usage_ns is not None else None, limit, used)


def affinity_cpu_count() -> int:
    """CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1
