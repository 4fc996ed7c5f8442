"""How the GPUs are connected: the records of ``Backend.topology()`` (``%gpu --topology``).

What ``nvidia-smi topo -m`` and ``nvidia-smi topo -p2p r`` show: each GPU's links, and each
pair's path and whether P2P works. NVML's backend reads them (``nvml/topology.py``); the
simulated one makes up an HGX board (``simulated/topology.py``).

Path labels follow ``nvidia-smi topo -m``: ``NV<n>`` (n NVLinks, direct or through NVSwitch),
``PIX`` (one PCIe switch), ``PXB`` (several PCIe switches), ``PHB`` (a PCIe host bridge, the
CPU), ``NODE`` (host bridges of one NUMA node), ``SYS`` (across NUMA nodes, the CPU
interconnect), ``"?"`` (not known).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuLinks:
    """One GPU's own links: active NVLinks (and to what) and its PCIe link now and at most."""

    index: int
    name: str | None
    nvlinks: int | None  # active NVLinks; None: NVML cannot tell (no NVLink on PCIe cards: 0)
    nvswitch_links: int  # of those, links to an NVSwitch
    pcie_gen: int | None
    pcie_width: int | None
    pcie_max_gen: int | None
    pcie_max_width: int | None
    error: str | None = None  # why nothing is known of it ("GPU 1 did not answer within 2 s")


@dataclass(frozen=True)
class GpuPair:
    """The path between two GPUs and whether they can read each other's memory directly."""

    a: int
    b: int
    path: str  # NV<n>, PIX, PXB, PHB, NODE, SYS, or "?"
    nvlinks: int
    p2p: bool | None  # P2P reads possible (over NVLink or PCIe)
    p2p_reason: str | None  # why not, in words

    @property
    def over_nvlink(self) -> bool:
        """Whether the GPUs talk over NVLink (directly or through NVSwitch)."""
        return self.path.startswith("NV")


@dataclass(frozen=True)
class Topology:
    """The GPUs' links and every pair's path; ``reason`` says why it is empty.

    ``simulated``: made up for the simulated backend (``simulated/topology.py``), not read.
    """

    gpus: tuple[GpuLinks, ...]
    pairs: tuple[GpuPair, ...]
    reason: str | None = None
    simulated: bool = False

    def pair(self, a: int, b: int) -> GpuPair | None:
        """The pair of GPUs ``a`` and ``b`` (in either order)."""
        lo, hi = min(a, b), max(a, b)
        return next((p for p in self.pairs if (p.a, p.b) == (lo, hi)), None)
