"""The simulated GPUs' interconnect: an HGX H200 board, every pair over NVSwitch."""

from __future__ import annotations

from jupyter_gpu.readings.topology import GpuLinks, GpuPair, Topology

SIM_NVLINKS = 18
"""NVLinks per GPU of an HGX H200 board, all to its NVSwitches (NVLink 4)."""


def simulated_topology(count: int, name: str) -> Topology:
    """``count`` GPUs called ``name`` as on an HGX H200 board: every pair over NVSwitch.

    Each GPU has 18 NVLinks to the board's NVSwitches and a PCIe gen 5 x16 link; every pair is
    ``NV18`` with P2P. Labelled ``simulated``, like the simulated GPUs themselves.
    """
    gpus = tuple(GpuLinks(i, name, SIM_NVLINKS, SIM_NVLINKS, 5, 16, 5, 16) for i in range(count))
    pairs = tuple(
        GpuPair(a, b, f"NV{SIM_NVLINKS}", SIM_NVLINKS, True, None)
        for a in range(count)
        for b in range(a + 1, count)
    )
    return Topology(gpus, pairs, simulated=True)
