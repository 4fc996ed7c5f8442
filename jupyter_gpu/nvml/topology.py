"""How the GPUs are connected, as NVML reports it: NVLink or PCIe, and whether P2P works.

What ``nvidia-smi topo -m`` and ``nvidia-smi topo -p2p r`` show (the records of
``readings/topology.py``), read once on demand (``NvmlBackend.topology()`` for ``%gpu
--topology``, ``gpu_count`` for ``%%torchrun``), never on the sampler's tick. Every NVML error
becomes a value (``None``), as in ``nvml.py``. Starting NVML (``nvmlInit``, counting the GPUs)
has the deadline too (``readings/startup.py``): a driver that hangs there gives a reason, not a
hung kernel. Each GPU, then each pair, is read in its own thread behind the per-GPU deadline
(``deadline.py``): a GPU that does not answer has an ``error`` saying so, its pairs a path of
``"?"``, and the others are read as usual.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from jupyter_gpu.nvml.session import NvmlSession, Stuck
from jupyter_gpu.readings.deadline import READ_DEADLINE_S, DeadlineReader
from jupyter_gpu.readings.startup import NVML_START, NotAnswered, call_within
from jupyter_gpu.readings.topology import GpuLinks, GpuPair, Topology

T = TypeVar("T")
_log = logging.getLogger("jupyter_gpu")

_LEVELS = {0: "SELF", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
_P2P_STATUS = {
    0: None,
    1: "the chipset does not support P2P",
    2: "the GPU does not support P2P",
    3: "the PCIe topology (IOH) does not support P2P",
    4: "P2P is disabled by a driver setting (registry key)",
    5: "P2P is not supported",
}


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


def read_topology(nvml: Any = None, deadline_s: float = READ_DEADLINE_S) -> Topology:
    """Read the GPUs' links and pairwise paths from NVML (initialised and shut down here).

    Args:
        nvml: an object with pynvml's interface (default: ``pynvml``); tests pass a fake.
        deadline_s: how long a GPU (and a pair) may take to answer.
    """
    if nvml is None:
        try:
            import pynvml
        except ImportError:
            return Topology((), (), "nvidia-ml-py is not installed, so NVML cannot be used")
        nvml = pynvml
    try:
        started = call_within(
            NVML_START,
            "jupyter-gpu-topology-start",
            lambda: _start(nvml, deadline_s),
            deadline_s,
            dispose=lambda opened: opened[0].close(),
        )
    except nvml.NVMLError as err:
        return Topology((), (), f"NVML failed to initialise: {err}")
    if isinstance(started, NotAnswered):
        return Topology((), (), did_not_answer(started))
    session, count = started
    try:
        return read_with(nvml, session, count)
    finally:
        session.close()  # nvmlShutdown now, or when a hung call returns


def did_not_answer(late: NotAnswered) -> str:
    """Why there is no GPU to read: NVML's start-up has not returned within the deadline."""
    return (
        f"NVML did not answer within {late.deadline_s:g} s while starting: nvmlInit or counting "
        f"the GPUs has been out for {late.waited_s:.0f} s (the driver is not responding)"
    )


def _start(nvml: Any, deadline_s: float) -> tuple[NvmlSession, int]:
    """``nvmlInit`` and the GPU count (0 when NVML cannot count them).

    Raises:
        NVMLError: ``nvmlInit`` failed.
    """
    session = NvmlSession(nvml, deadline_s, _log)
    return session, _call(nvml, nvml.nvmlDeviceGetCount) or 0


@dataclass(frozen=True)
class _Gpu:
    handle: Any
    links: GpuLinks
    bus_id: str | None
    remotes: list[str]


def _read_gpu(nvml: Any, i: int) -> _Gpu:
    h = _call(nvml, nvml.nvmlDeviceGetHandleByIndex, i)
    if h is None:
        return _Gpu(None, GpuLinks(i, None, None, 0, None, None, None, None), None, [])
    active, switch, remote = _links(nvml, h)
    links = GpuLinks(
        index=i,
        name=_text(_call(nvml, nvml.nvmlDeviceGetName, h)),
        nvlinks=active,
        nvswitch_links=switch,
        pcie_gen=_call(nvml, nvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
        pcie_width=_call(nvml, nvml.nvmlDeviceGetCurrPcieLinkWidth, h),
        pcie_max_gen=_call(nvml, nvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
        pcie_max_width=_call(nvml, nvml.nvmlDeviceGetMaxPcieLinkWidth, h),
    )
    return _Gpu(h, links, _bus_id(_call(nvml, nvml.nvmlDeviceGetPciInfo, h)), remote)


def _read_pair(nvml: Any, a: int, b: int, gpus: list[_Gpu]) -> GpuPair:
    ga, gb = gpus[a], gpus[b]
    if ga.handle is None or gb.handle is None:
        return GpuPair(a, b, "?", 0, None, "NVML cannot open one of the GPUs")
    direct = sum(1 for r in ga.remotes if r == gb.bus_id) if gb.bus_id else 0
    via_switch = min(ga.links.nvswitch_links, gb.links.nvswitch_links)
    nvlinks = direct or via_switch
    if nvlinks:
        path = f"NV{nvlinks}"
    else:
        level = _call(nvml, nvml.nvmlDeviceGetTopologyCommonAncestor, ga.handle, gb.handle)
        path = _LEVELS.get(int(level), "?") if level is not None else "?"
    read_index = getattr(nvml, "NVML_P2P_CAPS_INDEX_READ", 0)
    status = _call(nvml, nvml.nvmlDeviceGetP2PStatus, ga.handle, gb.handle, read_index)
    p2p = None if status is None else status == 0
    if status is None:
        reason: str | None = "NVML cannot tell"
    else:
        reason = _P2P_STATUS.get(int(status), f"P2P status {status}")
    return GpuPair(a, b, path, nvlinks, p2p, reason)


def _within(
    session: NvmlSession, name: str, keys: list[int], read: Callable[[int], T]
) -> dict[int, T]:
    """``read(key)`` of every key, each in its own thread; those that answered in time."""

    def guarded(key: int) -> T | None:
        try:
            return read(key)
        except Stuck:
            return None

    reader: DeadlineReader[T] = DeadlineReader(
        name, keys, guarded, session.deadline_s, _log, what="a topology call"
    )
    try:
        reader.read(session.deadline_s)
        return {k: a.value for k, a in reader.answers().items()}
    finally:
        reader.close()


def read_with(nvml: Any, session: NvmlSession, count: int) -> Topology:
    """The links of GPUs ``0`` to ``count - 1`` and their pairs, through an open session.

    Each GPU, then each pair, in its own thread behind the session's deadline.
    """
    if not count:
        return Topology((), (), "No NVIDIA GPU found")
    deadline = session.deadline_s
    answered = _within(
        session,
        "jupyter-gpu-topology",
        list(range(count)),
        lambda i: session.call(i, "topology", lambda: _read_gpu(nvml, i)),
    )
    gpus: list[_Gpu] = []
    for i in range(count):
        gpu = answered.get(i)
        if gpu is None:
            late = f"GPU {i} did not answer within {deadline:g} s (an NVML call on it is hung)"
            gpu = _Gpu(None, GpuLinks(i, None, None, 0, None, None, None, None, late), None, [])
        gpus.append(gpu)
    keys = [(a, b) for a in range(count) for b in range(a + 1, count)]
    # A pair's calls touch both GPUs: counted on both, so a hung one is never asked again.
    pairs_read = _within(
        session,
        "jupyter-gpu-topology-pair",
        list(range(len(keys))),
        lambda k: session.call(
            keys[k][0],
            "topology",
            lambda: session.call(
                keys[k][1], "topology", lambda: _read_pair(nvml, keys[k][0], keys[k][1], gpus)
            ),
        ),
    )
    pairs = []
    for k, (a, b) in enumerate(keys):
        pair = pairs_read.get(k)
        if pair is None:
            errors = [g.links.error for g in (gpus[a], gpus[b]) if g.links.error]
            late = f"GPU {a} or GPU {b} did not answer within {deadline:g} s"
            why = errors[0] if errors else late
            pair = GpuPair(a, b, "?", 0, None, why)
        pairs.append(pair)
    return Topology(tuple(g.links for g in gpus), tuple(pairs))


def gpu_count(nvml: Any = None, deadline_s: float = READ_DEADLINE_S) -> tuple[int, str | None]:
    """How many GPUs NVML sees, and why none when it is 0 (NVML initialised and shut down).

    ``nvmlInit`` and the count run behind ``deadline_s`` (``readings/startup.py``): a driver
    that does not answer gives 0 and a reason that says so, within the deadline. The thread
    left in the call shuts NVML down when it returns.

    Args:
        nvml: an object with pynvml's interface (default: ``pynvml``); tests pass a fake.
        deadline_s: how long NVML may take to start and count the GPUs.
    """
    if nvml is None:
        try:
            import pynvml
        except ImportError:
            return 0, "nvidia-ml-py is not installed"
        nvml = pynvml
    counted = call_within(NVML_START, "jupyter-gpu-count", lambda: _count(nvml), deadline_s)
    if isinstance(counted, NotAnswered):
        return 0, did_not_answer(counted)
    return counted


def _count(nvml: Any) -> tuple[int, str | None]:
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
