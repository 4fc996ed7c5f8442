"""The CPU-threads fix: torch's intra-op threads set to the CPUs this kernel may use.

torch sizes its intra-op thread pool from the machine's cores (``torch.get_num_threads()``),
not from a container's CPU quota: on a 2-CPU quota of a 64-core host, 32 threads queue behind
each other. The fix sets ``torch.set_num_threads`` to the usable CPUs of the cgroup quota
(``jupyter_gpu.host.cpus``), for a step whose work runs on the CPU. On a GPU the step's math is
the GPU's, and the fix is not tried.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .fixes import Fix

if TYPE_CHECKING:
    from .evidence import Evidence
    from .fixes import TuneSession


class Threads(Fix):
    """``torch.set_num_threads(usable CPUs)`` (see the module doc)."""

    family = "threads"
    key = "threads"
    order = 40
    exact = False  # a reduction split over other threads may sum in another order

    def __init__(self, count: int) -> None:
        self.count = count
        self.name = f"{count} CPU threads"

    def why_not(self, ev: Evidence) -> str | None:
        if ev.cuda:
            return "the step's math runs on the GPU: torch's CPU threads only run CPU ops"
        budget = ev.cpus.describe() if ev.cpus is not None else f"{self.count} CPUs"
        if ev.threads == self.count:
            return f"torch uses {ev.threads} threads already, the {budget} this kernel may use"
        return None

    @contextlib.contextmanager
    def applied(self, s: TuneSession) -> Iterator[None]:
        import torch  # loaded already: the magic imported it

        saved = torch.get_num_threads()
        torch.set_num_threads(self.count)
        try:
            yield
        finally:
            torch.set_num_threads(saved)

    def code(self, s: TuneSession) -> list[str]:
        return [f"torch.set_num_threads({self.count})  # the CPUs this kernel's quota allows"]

    def apply(self, s: TuneSession) -> str:
        import torch  # loaded already: the magic imported it

        torch.set_num_threads(self.count)
        return f"torch.set_num_threads({self.count})"
