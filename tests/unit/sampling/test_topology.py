"""``read_topology`` over a fake NVML: NVSwitch, direct NVLink, PCIe without P2P, one GPU."""

from __future__ import annotations

import threading
import time

import pynvml
import pytest
from IPython.utils.capture import capture_output

from jupyter_gpu.magics.gpu.report import show_topology
from jupyter_gpu.nvml.topology import read_topology
from tests.fakes.fake_topology import FakeTopologyNvml


def shown(topology: object) -> str:
    from IPython.core.interactiveshell import InteractiveShell

    InteractiveShell.instance()  # displays go through a shell's publisher
    with capture_output() as captured:
        show_topology(topology)
    return "\n".join(o.data["text/plain"] for o in captured.outputs)


def test_an_nvswitch_board_is_nv18_between_every_pair() -> None:
    fake = FakeTopologyNvml(devices=4, nvswitch_links=18)
    topology = read_topology(fake)
    assert [g.nvlinks for g in topology.gpus] == [18] * 4
    assert [g.nvswitch_links for g in topology.gpus] == [18] * 4
    assert len(topology.pairs) == 6
    assert {p.path for p in topology.pairs} == {"NV18"}
    assert all(p.p2p and p.over_nvlink for p in topology.pairs)
    assert fake.inits == fake.shutdowns == 1
    text = shown(topology)
    assert "GPU3  NV18  NV18  NV18  X" in text
    assert "18 active NVLinks, 18 to NVSwitch" in text
    assert "Every pair talks over NVLink" in text


def test_a_bridge_counts_direct_links_and_other_pairs_use_pcie() -> None:
    fake = FakeTopologyNvml(devices=3, direct_links={(0, 1): 4}, ancestor=pynvml.NVML_TOPOLOGY_NODE)
    topology = read_topology(fake)
    pair01, pair02 = topology.pair(1, 0), topology.pair(0, 2)
    assert pair01 is not None
    assert pair02 is not None
    assert (pair01.path, pair01.nvlinks) == ("NV4", 4)
    assert (pair02.path, pair02.nvlinks) == ("NODE", 0)
    assert "talk over PCIe" in shown(topology)


def test_pcie_without_p2p_says_why() -> None:
    fake = FakeTopologyNvml(
        devices=2,
        no_nvlink=True,
        ancestor=pynvml.NVML_TOPOLOGY_HOSTBRIDGE,
        p2p_status=pynvml.NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED,
    )
    topology = read_topology(fake)
    assert topology.gpus[0].nvlinks == 0
    pair = topology.pairs[0]
    assert (pair.path, pair.p2p) == ("PHB", False)
    assert pair.p2p_reason == "the PCIe topology (IOH) does not support P2P"
    text = shown(topology)
    assert "GPU0-GPU1: no P2P, the PCIe topology (IOH) does not support P2P" in text
    assert "PCIe gen 5 x16" in text


def test_one_gpu_and_no_gpu_and_errors_are_values() -> None:
    one = read_topology(FakeTopologyNvml(devices=1, nvswitch_links=18))
    assert one.pairs == ()
    assert "One GPU: there is no GPU-to-GPU path" in shown(one)
    none = read_topology(FakeTopologyNvml(devices=0))
    assert none.reason == "No NVIDIA GPU found"
    assert "No GPU: No NVIDIA GPU found." in shown(none)
    broken = FakeTopologyNvml(devices=2, nvswitch_links=2)
    broken.fail("nvmlDeviceGetP2PStatus", pynvml.NVML_ERROR_UNKNOWN)
    broken.fail("nvmlDeviceGetCurrPcieLinkGeneration", pynvml.NVML_ERROR_NOT_SUPPORTED)
    topology = read_topology(broken)
    assert topology.pairs[0].p2p is None
    assert topology.gpus[0].pcie_gen is None
    failing = FakeTopologyNvml(devices=2)
    failing.fail("nvmlInit", pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    assert read_topology(failing).reason is not None


def test_a_hung_gpu_is_named_and_the_others_read_within_the_deadline() -> None:
    fake = FakeTopologyNvml(devices=3, nvswitch_links=18)
    fake.hang(1)  # every call on GPU 1 blocks, as with a hung driver
    try:
        start = time.monotonic()
        topology = read_topology(fake, deadline_s=0.5)
        took = time.monotonic() - start
    finally:
        fake.release(1)
    assert took < 2 * 0.5 + 1.0  # the GPUs' round, the pairs' round, room for busy cores
    error = topology.gpus[1].error
    assert error == "GPU 1 did not answer within 0.5 s (an NVML call on it is hung)"
    assert [g.nvlinks for g in topology.gpus] == [18, None, 18]
    assert topology.pair(0, 2).path == "NV18"  # type: ignore[union-attr]
    assert topology.pair(0, 1).path == "?"  # type: ignore[union-attr]
    assert "GPU1: GPU 1 did not answer" in shown(topology)
    for thread in threading.enumerate():  # the worker that was stuck in GPU 1's call
        if thread.name.startswith("jupyter-gpu"):
            thread.join(10)
    assert fake.inits == fake.shutdowns == 1  # shut down once the hung call returned


@pytest.mark.parametrize("backend", ["none"])  # simulated: test_simulated_shared.py
def test_the_magic_says_the_none_backend_has_no_topology(backend: str) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jupyter_gpu")
    try:
        with capture_output() as captured:
            topo = ip.run_line_magic("gpu", f"--topology --backend {backend} -o")
        assert topo.gpus == ()
        shown = captured.outputs[0].data["text/plain"]
        assert "no interconnect to show: GPU monitoring is switched off" in shown
    finally:
        ip.run_line_magic("unload_ext", "jupyter_gpu")
