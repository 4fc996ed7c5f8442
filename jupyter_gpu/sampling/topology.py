"""How the GPUs are connected, as NVML reports it: NVLink or PCIe, and whether P2P works.

What ``nvidia-smi topo -m`` and ``nvidia-smi topo -p2p r`` show, read once on demand (for
``%gpu --topology`` and ``%%torchrun``), never on the sampler's tick. Every NVML error becomes
a value (``None``), as in ``nvml.py``.

Path labels follow ``nvidia-smi topo -m``: ``NV<n>`` (n NVLinks, direct or through NVSwitch),
``PIX`` (one PCIe switch), ``PXB`` (several PCIe switches), ``PHB`` (a PCIe host bridge, the
CPU), ``NODE`` (host bridges of one NUMA node), ``SYS`` (across NUMA nodes, the CPU
interconnect).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

_LEVELS = {0: "SELF", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
_P2P_STATUS = {
    0: None,
    1: "the chipset does not support P2P",
    2: "the GPU does not support P2P",
    3: "the PCIe topology (IOH) does not support P2P",
    4: "P2P is disabled by a driver setting (registry key)",
    5: "P2P is not supported",
}


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

    ``simulated``: made up for the simulated backend (``simulated_topology``), not read.
    """

    gpus: tuple[GpuLinks, ...]
    pairs: tuple[GpuPair, ...]
    reason: str | None = None
    simulated: bool = False

    def pair(self, a: int, b: int) -> GpuPair | None:
        """The pair of GPUs ``a`` and ``b`` (in either order)."""
        lo, hi = min(a, b), max(a, b)
        return next((p for p in self.pairs if (p.a, p.b) == (lo, hi)), None)


def _call(nvml: Any, fn: Callable[..., T], *args: Any) -> T | None:
    try:
        return fn(*args)
    except (nvml.NVMLError, AttributeError, TypeError):
        return None


def _bus_id(value: Any) -> str | None:
    bus = getattr(value, "busId", None)
    if bus is None:
        return None
    text = bus.decode() if isinstance(bus, bytes) else str(bus)
    return text.lower().removeprefix("0000")[-12:]  # nvidia-ml-py gives 8 or 4 domain digits


def _links(nvml: Any, handle: Any) -> tuple[int | None, int, list[str]]:
    """(active links, links to NVSwitch, remote bus ids of links to GPUs)."""
    max_links = int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))
    active = 0
    switch = 0
    remotes: list[str] = []
    supported = False
    for link in range(max_links):
        state = _call(nvml, nvml.nvmlDeviceGetNvLinkState, handle, link)
        if state is None:
            continue
        supported = True
        if not state:
            continue
        active += 1
        kind = _call(nvml, nvml.nvmlDeviceGetNvLinkRemoteDeviceType, handle, link)
        if kind == getattr(nvml, "NVML_NVLINK_DEVICE_TYPE_SWITCH", 2):
            switch += 1
            continue
        remote = _bus_id(_call(nvml, nvml.nvmlDeviceGetNvLinkRemotePciInfo, handle, link))
        if remote:
            remotes.append(remote)
    return (active if supported else 0), switch, remotes


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def read_topology(nvml: Any = None) -> Topology:
    """Read the GPUs' links and pairwise paths from NVML (initialised and shut down here).

    Args:
        nvml: an object with pynvml's interface (default: ``pynvml``); tests pass a fake.
    """
    if nvml is None:
        try:
            import pynvml
        except ImportError:
            return Topology((), (), "nvidia-ml-py is not installed, so NVML cannot be used")
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        return Topology((), (), f"NVML failed to initialise: {err}")
    try:
        return _read(nvml)
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()


def _read(nvml: Any) -> Topology:
    count = _call(nvml, nvml.nvmlDeviceGetCount) or 0
    if not count:
        return Topology((), (), "No NVIDIA GPU found")
    handles = [_call(nvml, nvml.nvmlDeviceGetHandleByIndex, i) for i in range(count)]
    gpus = []
    bus_ids: list[str | None] = []
    remotes: list[list[str]] = []
    for i, h in enumerate(handles):
        if h is None:
            gpus.append(GpuLinks(i, None, None, 0, None, None, None, None))
            bus_ids.append(None)
            remotes.append([])
            continue
        active, switch, remote = _links(nvml, h)
        remotes.append(remote)
        bus_ids.append(_bus_id(_call(nvml, nvml.nvmlDeviceGetPciInfo, h)))
        gpus.append(
            GpuLinks(
                index=i,
                name=_text(_call(nvml, nvml.nvmlDeviceGetName, h)),
                nvlinks=active,
                nvswitch_links=switch,
                pcie_gen=_call(nvml, nvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
                pcie_width=_call(nvml, nvml.nvmlDeviceGetCurrPcieLinkWidth, h),
                pcie_max_gen=_call(nvml, nvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
                pcie_max_width=_call(nvml, nvml.nvmlDeviceGetMaxPcieLinkWidth, h),
            )
        )
    pairs = []
    for a in range(count):
        for b in range(a + 1, count):
            ha, hb = handles[a], handles[b]
            if ha is None or hb is None:
                pairs.append(GpuPair(a, b, "?", 0, None, "NVML cannot open one of the GPUs"))
                continue
            direct = sum(1 for r in remotes[a] if r == bus_ids[b]) if bus_ids[b] else 0
            via_switch = min(gpus[a].nvswitch_links, gpus[b].nvswitch_links)
            nvlinks = direct or via_switch
            if nvlinks:
                path = f"NV{nvlinks}"
            else:
                level = _call(nvml, nvml.nvmlDeviceGetTopologyCommonAncestor, ha, hb)
                path = _LEVELS.get(int(level), "?") if level is not None else "?"
            read_index = getattr(nvml, "NVML_P2P_CAPS_INDEX_READ", 0)
            status = _call(nvml, nvml.nvmlDeviceGetP2PStatus, ha, hb, read_index)
            p2p = None if status is None else status == 0
            reason = (
                "NVML cannot tell"
                if status is None
                else _P2P_STATUS.get(int(status), f"P2P status {status}")
            )
            pairs.append(GpuPair(a, b, path, nvlinks, p2p, reason))
    return Topology(tuple(gpus), tuple(pairs))


def gpu_count() -> tuple[int, str | None]:
    """How many GPUs NVML sees, and why none when it is 0 (NVML initialised and shut down)."""
    try:
        import pynvml
    except ImportError:
        return 0, "nvidia-ml-py is not installed"
    nvml: Any = pynvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        return 0, f"NVML failed to initialise: {err}"
    try:
        count = int(nvml.nvmlDeviceGetCount())
    except nvml.NVMLError as err:
        return 0, f"NVML could not count the GPUs: {err}"
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()
    return count, None if count else "No NVIDIA GPU found"


SIM_NVLINKS = 18
"""NVLinks per GPU of an HGX H200 board, all to its NVSwitches (NVLink 4)."""


def simulated_topology(count: int) -> Topology:
    """The simulated backend's GPUs as on an HGX H200 board: every pair over NVSwitch.

    Each GPU has 18 NVLinks to the board's NVSwitches and a PCIe gen 5 x16 link; every pair is
    ``NV18`` with P2P. Labelled ``simulated``, like the simulated GPUs themselves.
    """
    from jupyter_gpu.sampling.simulated import SIM_NAME

    gpus = tuple(
        GpuLinks(i, SIM_NAME, SIM_NVLINKS, SIM_NVLINKS, 5, 16, 5, 16) for i in range(count)
    )
    pairs = tuple(
        GpuPair(a, b, f"NV{SIM_NVLINKS}", SIM_NVLINKS, True, None)
        for a in range(count)
        for b in range(a + 1, count)
    )
    return Topology(gpus, pairs, simulated=True)
