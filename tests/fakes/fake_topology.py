"""The fake NVML plus the topology calls (NVLink, PCIe links, P2P status, common ancestor).

fake = FakeTopologyNvml(devices=4, nvswitch_links=18)       # an HGX board: NV18 everywhere
fake = FakeTopologyNvml(devices=2, direct_links={(0, 1): 4})  # an NVLink bridge: NV4
fake = FakeTopologyNvml(devices=2, ancestor=30, p2p_status=3)  # PCIe through the CPU, no P2P
"""

from __future__ import annotations

from typing import Any

import pynvml

from tests.fakes.fake_nvml import FakeHandle, FakeNvml

MAX_LINKS = 18


class FakeTopologyNvml(FakeNvml):
    """``FakeNvml`` with links: direct GPU-to-GPU NVLinks, NVSwitch links, or PCIe only.

    Args:
        devices: how many GPUs.
        nvswitch_links: active links from every GPU to NVSwitches.
        direct_links: ``{(a, b): n}``: n NVLinks straight between GPUs a and b.
        ancestor: NVML_TOPOLOGY_* level between GPUs without NVLink.
        p2p_status: what ``nvmlDeviceGetP2PStatus`` says (0: OK).
        no_nvlink: NVLink state calls raise NOT_SUPPORTED (a PCIe card).
    """

    def __init__(
        self,
        devices: int = 2,
        *,
        nvswitch_links: int = 0,
        direct_links: dict[tuple[int, int], int] | None = None,
        ancestor: int = pynvml.NVML_TOPOLOGY_HOSTBRIDGE,
        p2p_status: int = pynvml.NVML_P2P_STATUS_OK,
        no_nvlink: bool = False,
    ) -> None:
        super().__init__(devices)
        self.ancestor = ancestor
        self.p2p_status = p2p_status
        self.no_nvlink = no_nvlink
        # per device: list of (kind, remote index) per active link; kind "gpu" or "switch"
        self.links: list[list[tuple[str, int]]] = [
            [("switch", -1)] * nvswitch_links for _ in range(devices)
        ]
        for (a, b), n in (direct_links or {}).items():
            self.links[a] += [("gpu", b)] * n
            self.links[b] += [("gpu", a)] * n

    def _link(self, function: str, handle: FakeHandle, link: int) -> tuple[str, int] | None:
        self._device(function, handle)
        if self.no_nvlink:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        links = self.links[handle.index]
        return links[link] if link < len(links) else None

    def nvmlDeviceGetNvLinkState(self, handle: FakeHandle, link: int) -> int:
        return 1 if self._link("nvmlDeviceGetNvLinkState", handle, link) else 0

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: FakeHandle, link: int) -> int:
        found = self._link("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
        if found is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if found[0] == "switch":
            return pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH
        return pynvml.NVML_NVLINK_DEVICE_TYPE_GPU

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: FakeHandle, link: int) -> Any:
        found = self._link("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
        if found is None or found[0] != "gpu":
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self.nvmlDeviceGetPciInfo(FakeHandle(found[1]))

    def nvmlDeviceGetTopologyCommonAncestor(self, a: FakeHandle, b: FakeHandle) -> int:
        self._device("nvmlDeviceGetTopologyCommonAncestor", a)
        self._device("nvmlDeviceGetTopologyCommonAncestor", b)
        return self.ancestor

    def nvmlDeviceGetP2PStatus(self, a: FakeHandle, b: FakeHandle, index: int) -> int:
        self._device("nvmlDeviceGetP2PStatus", a)
        self._device("nvmlDeviceGetP2PStatus", b)
        return self.p2p_status

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: FakeHandle) -> int:
        self._device("nvmlDeviceGetCurrPcieLinkGeneration", handle)
        return 5

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: FakeHandle) -> int:
        self._device("nvmlDeviceGetMaxPcieLinkGeneration", handle)
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: FakeHandle) -> int:
        self._device("nvmlDeviceGetCurrPcieLinkWidth", handle)
        return 16

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: FakeHandle) -> int:
        self._device("nvmlDeviceGetMaxPcieLinkWidth", handle)
        return 16
