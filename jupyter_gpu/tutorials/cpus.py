"""How many CPUs a notebook may use: the cgroup's CPU quota, not the machine's core count.

In a container (a JupyterHub spawner, Kubernetes, ``docker run --cpus``) the CPU *quota* is what
a student actually has, while ``os.sched_getaffinity`` and ``os.cpu_count`` still show every core
of the host. A notebook that sizes its DataLoader workers or Inductor's compile workers from the
core count starts a process per host core, and on a 2-CPU quota they queue behind each other.

The quota is read with the monitor's own reader (:mod:`jupyter_gpu.host.cgroup`), so the
tutorials and the sidebar's *Host* card agree on the number.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

from jupyter_gpu.host.cgroup import CgroupReader

# The quota and the worker count live with the host reader, where %%profile's DataLoader advice
# reads them too (the magics cannot import the tutorials).
from jupyter_gpu.host.cpus import CpuBudget, dataloader_workers, read_cpu_budget

__all__ = [
    "COMPILE_THREADS_ENV",
    "CpuBudget",
    "compile_threads",
    "dataloader_workers",
    "limit_compile_threads",
    "read_cpu_budget",
    "usable_cpus",
]

COMPILE_THREADS_ENV = "TORCHINDUCTOR_COMPILE_THREADS"
# Inductor's own default caps its compile workers at 32 (torch/_inductor/config.py).
_INDUCTOR_MAX_THREADS = 32


def usable_cpus(reader: CgroupReader | None = None) -> int:
    """Whole CPUs this process may keep busy (:attr:`CpuBudget.usable`), read now."""
    return read_cpu_budget(reader).usable


def compile_threads(budget: CpuBudget | None = None) -> int:
    """Inductor compile workers for this process's CPU quota (Inductor's own cap is 32)."""
    return min(_INDUCTOR_MAX_THREADS, (budget or read_cpu_budget()).usable)


def limit_compile_threads(
    budget: CpuBudget | None = None, environ: MutableMapping[str, str] | None = None
) -> int:
    """Make Inductor start no more compile workers than the CPU quota allows; returns the count.

    A ``TORCHINDUCTOR_COMPILE_THREADS`` the user set wins and is returned unchanged. Otherwise it
    is set in the environment (child processes, such as notebook 06's, inherit it) and, when
    Inductor's config is already imported, in ``torch._inductor.config.compile_threads`` too:
    Inductor reads the variable once, at that import.
    """
    env = os.environ if environ is None else environ
    if env.get(COMPILE_THREADS_ENV, "").strip().isdigit():
        return int(env[COMPILE_THREADS_ENV])
    threads = compile_threads(budget)
    env[COMPILE_THREADS_ENV] = str(threads)
    config = sys.modules.get("torch._inductor.config")
    if config is not None:
        config.compile_threads = threads  # type: ignore[attr-defined]  # a torch config module
    return threads
