"""How many CPUs a notebook may use: the cgroup's CPU quota, not the machine's core count.

In a container (a JupyterHub spawner, Kubernetes, ``docker run --cpus``) the CPU *quota* is what
a student actually has, while ``os.sched_getaffinity`` and ``os.cpu_count`` still show every core
of the host. A notebook that sizes its DataLoader workers or Inductor's compile workers from the
core count starts a process per host core, and on a 2-CPU quota they queue behind each other.

The quota is read with the monitor's own reader (:mod:`jupyter_gpu.host.cgroup`), so the
tutorials and the sidebar's *Host* card agree on the number.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass

from jupyter_gpu.host.cgroup import CgroupReader, affinity_cpu_count

COMPILE_THREADS_ENV = "TORCHINDUCTOR_COMPILE_THREADS"
# Inductor's own default caps its compile workers at 32 (torch/_inductor/config.py).
_INDUCTOR_MAX_THREADS = 32


@dataclass(frozen=True)
class CpuBudget:
    """The CPUs this process may use, and where the figure comes from.

    Attributes:
        affinity: CPUs in this process's affinity mask (what ``os.sched_getaffinity`` says).
        quota: the cgroup's CPU quota in CPUs (``cpu.max``; 1.5 for ``150000 100000``), or
            ``None`` without one.
    """

    affinity: int
    quota: float | None

    @property
    def usable(self) -> int:
        """Whole CPUs this process can keep busy: the quota rounded down, at least 1."""
        if self.quota is None:
            return max(1, self.affinity)
        return max(1, min(self.affinity, math.floor(self.quota)))

    def describe(self) -> str:
        """One phrase, e.g. ``2 CPUs (cgroup quota 2.5 of 64 cores)``."""
        if self.quota is None or self.quota >= self.affinity:
            return f"{self.usable} CPUs"
        return f"{self.usable} CPUs (cgroup quota {self.quota:g} of {self.affinity} cores)"


def read_cpu_budget(reader: CgroupReader | None = None, affinity: int | None = None) -> CpuBudget:
    """Read the quota now (a few small file reads). ``reader``/``affinity`` are for tests."""
    limits = (reader or CgroupReader()).read()
    return CpuBudget(affinity if affinity is not None else affinity_cpu_count(), limits.cpu_quota)


def usable_cpus(reader: CgroupReader | None = None) -> int:
    """Whole CPUs this process may keep busy (:attr:`CpuBudget.usable`), read now."""
    return read_cpu_budget(reader).usable


def dataloader_workers(most: int = 8, budget: CpuBudget | None = None) -> int:
    """DataLoader worker processes for this process's CPU quota, at most ``most``.

    One CPU stays with the training process itself (it launches the GPU's work and collates
    batches), so the count is the usable CPUs less one: 0 on a single CPU, where a worker would
    only take turns with the training loop on the same CPU.
    """
    usable = (budget or read_cpu_budget()).usable
    return max(0, min(most, usable - 1))


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
