"""How many CPUs this process may use: the cgroup's CPU quota, not the machine's core count.

In a container (a JupyterHub spawner, Kubernetes, ``docker run --cpus``) the CPU *quota* is what
a user actually has, while ``os.sched_getaffinity`` and ``os.cpu_count`` still show every core
of the host. A DataLoader sized from the core count starts a worker per host core, and on a
2-CPU quota they queue behind each other. The tutorials (``jupyter_gpu.tutorials.cpus``) and
``%%profile``'s DataLoader advice count workers here, with the sidebar's own quota reader.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from jupyter_gpu.host.cgroup import CgroupReader, affinity_cpu_count


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


@dataclass(frozen=True)
class WorkerCount:
    """DataLoader workers for a CPU budget, and what decided the count.

    Attributes:
        workers: the worker processes to start.
        budget: the CPUs this process may use.
        most: the cap on the count.
    """

    workers: int
    budget: CpuBudget
    most: int

    @property
    def capped(self) -> bool:
        """Whether the cap decided the count (the CPUs less one would allow more)."""
        return self.budget.usable - 1 > self.most

    def why(self) -> str:
        """``3 = the 4 CPUs this kernel may use, less one for the training process``, or the cap.

        When the cap decided it: ``8, the cap (the 16 CPUs this kernel may use, less one for the
        training process, would allow 15)``.
        """
        quota = (
            f"the {self.budget.describe()} this kernel may use, less one for the training process"
        )
        if self.capped:
            return f"{self.workers}, the cap ({quota}, would allow {self.budget.usable - 1})"
        return f"{self.workers} = {quota}"


def worker_count(most: int = 8, budget: CpuBudget | None = None) -> WorkerCount:
    """DataLoader worker processes for this process's CPU quota, at most ``most``, with why.

    One CPU stays with the training process itself (it launches the GPU's work and collates
    batches), so the count is the usable CPUs less one: 0 on a single CPU, where a worker would
    only take turns with the training loop on the same CPU.
    """
    budget = budget or read_cpu_budget()
    return WorkerCount(max(0, min(most, budget.usable - 1)), budget, most)


def dataloader_workers(most: int = 8, budget: CpuBudget | None = None) -> int:
    """:func:`worker_count`'s count: the CPUs this process may use less one, at most ``most``."""
    return worker_count(most, budget).workers
