"""Host CPU and memory: cgroup v2 and v1 limits (files as the kernel writes them), or the host."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from jupyter_gpu.host.cgroup import CgroupReader
from jupyter_gpu.host.reader import HostReader

GIB = 1 << 30


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")


def cgroup_tree(tmp_path: Path, proc_cgroup: str, files: dict[str, str]) -> tuple[Path, Path]:
    """A cgroup mount holding ``files`` and the ``/proc/self/cgroup`` that reads ``proc_cgroup``."""
    root = tmp_path / "cgroup"
    proc = tmp_path / "proc_cgroup"
    proc.write_text(proc_cgroup)
    write(root, files)
    return root, proc


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def v2(tmp_path: Path) -> tuple[Path, Path]:
    return cgroup_tree(
        tmp_path,
        "0::/kubepods/pod1/ctr\n",
        {
            "cgroup.controllers": "cpu memory",
            "kubepods/pod1/cpu.max": "max 100000",
            "kubepods/pod1/memory.max": str(8 * GIB),
            "kubepods/pod1/ctr/cpu.max": "150000 100000",
            "kubepods/pod1/ctr/memory.max": "max",
            "kubepods/pod1/ctr/memory.current": str(3 * GIB),
            "kubepods/pod1/ctr/memory.stat": f"anon 100\ninactive_file {GIB}\nactive_file 5",
            "kubepods/pod1/ctr/cpu.stat": "usage_usec 1000000\nuser_usec 900000",
        },
    )


def test_v2_limits_come_from_the_tightest_level(v2: tuple[Path, Path]) -> None:
    root, proc = v2
    limits = CgroupReader(root, proc).read()
    assert limits.cpu_quota == 1.5
    assert limits.mem_limit_bytes == 8 * GIB  # set on the pod, not the container
    assert limits.mem_used_bytes == 2 * GIB  # current less inactive file cache
    assert limits.cpu_usage_s == 1.0


def test_host_reader_inside_a_v2_container(v2: tuple[Path, Path]) -> None:
    root, proc = v2
    clock = Clock()
    reader = HostReader(CgroupReader(root, proc), clock=clock)
    first = reader.read()
    assert first.cpu_pct is None  # no interval yet
    assert first.cpu_count == 1.5
    assert (first.mem_total_bytes, first.mem_used_bytes) == (8 * GIB, 2 * GIB)
    assert first.mem_limit_source == "cgroup"

    # 0.75 CPU-seconds over 1 s on a 1.5-CPU quota: 50 %
    write(root, {"kubepods/pod1/ctr/cpu.stat": "usage_usec 1750000"})
    clock.t += 1.0
    assert reader.read().cpu_pct == 50.0


def test_v1_limits(tmp_path: Path) -> None:
    root, proc = cgroup_tree(
        tmp_path,
        "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n",
        {
            "memory/docker/abc/memory.limit_in_bytes": str(4 * GIB),
            "memory/docker/abc/memory.usage_in_bytes": str(GIB),
            "memory/docker/abc/memory.stat": "cache 5\ntotal_inactive_file 1024",
            "memory/memory.limit_in_bytes": "9223372036854771712",  # unlimited
            "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "200000",
            "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000",
            "cpu,cpuacct/docker/abc/cpuacct.usage": "2500000000",
        },
    )
    reader = CgroupReader(root, proc)
    assert reader.version == 1
    limits = reader.read()
    assert limits.cpu_quota == 2.0
    assert limits.mem_limit_bytes == 4 * GIB
    assert limits.mem_used_bytes == GIB - 1024
    assert limits.cpu_usage_s == 2.5


def test_v1_without_limits_is_the_host(tmp_path: Path) -> None:
    root, proc = cgroup_tree(
        tmp_path,
        "4:memory:/\n1:cpu:/\n",
        {
            "memory/memory.limit_in_bytes": "9223372036854771712",
            "cpu/cpu.cfs_quota_us": "-1",
            "cpu/cpu.cfs_period_us": "100000",
        },
    )
    reader = HostReader(CgroupReader(root, proc))
    assert reader.read().cpu_pct is None
    time.sleep(0.1)  # CPU time counters tick every 10 ms
    sample = reader.read()
    assert sample.mem_limit_source == "host"
    assert sample.mem_total_bytes == psutil.virtual_memory().total
    assert sample.cpu_pct is not None
    assert 0.0 <= sample.cpu_pct <= 100.0


def test_no_cgroup_at_all_is_the_host(tmp_path: Path) -> None:
    reader = CgroupReader(tmp_path / "none", tmp_path / "none-either")
    assert reader.version is None
    limits = reader.read()
    assert (limits.cpu_quota, limits.mem_limit_bytes) == (None, None)


def test_garbage_in_cgroup_files_is_no_limit(tmp_path: Path) -> None:
    root, proc = cgroup_tree(
        tmp_path,
        "0::/\n",
        {"cgroup.controllers": "", "cpu.max": "lots 100000", "memory.max": "-", "cpu.stat": "x"},
    )
    limits = CgroupReader(root, proc).read()
    assert (limits.cpu_quota, limits.mem_limit_bytes, limits.cpu_usage_s) == (None, None, None)


def test_this_machine_reads_without_error() -> None:
    sample = HostReader().read()
    assert sample.mem_total_bytes is not None
    assert sample.mem_total_bytes > 0
    assert sample.cpu_count is not None
    assert sample.cpu_count > 0
