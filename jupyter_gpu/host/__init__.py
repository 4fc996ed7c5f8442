"""The host's CPU and memory, as the container's cgroup limits them where it does.

- ``reader.py``: ``HostReader``, one reading per tick (CPU %, CPUs, memory used and total).
- ``cgroup.py``: the cgroup's (v2 or v1) CPU quota and memory limit, read from its files.

It imports psutil, never ``pynvml`` or torch.
"""

from __future__ import annotations

from jupyter_gpu.host.cgroup import CgroupLimits, CgroupReader, affinity_cpu_count
from jupyter_gpu.host.reader import HostReader

__all__ = ["CgroupLimits", "CgroupReader", "HostReader", "affinity_cpu_count"]
