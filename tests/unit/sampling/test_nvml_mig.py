"""MIG: each MIG instance of a GPU in MIG mode is a device of its own (over the fake NVML).

The real GPU is never put in MIG mode by any test: only the fake is.
"""

from __future__ import annotations

import pynvml
from prometheus_client.parser import text_string_to_metric_families

from jupyter_gpu.host.reader import HostReader
from jupyter_gpu.nvml.backend import NvmlBackend
from jupyter_gpu.readings import Sample
from jupyter_gpu.server.metrics import render_metrics
from tests.fakes.fake_nvml import FakeNvml

GB = 1_000_000_000


def mig_fake() -> FakeNvml:
    fake = FakeNvml(devices=2)
    # GPU 0: two instances and an empty slot between them; GPU 1 stays whole.
    fake.enable_mig(0, [("3g.71gb", 71 * GB), None, ("1g.18gb", 18 * GB)])
    return fake


def test_each_mig_instance_is_a_device_with_its_parent() -> None:
    backend = NvmlBackend(nvml=mig_fake())
    info = backend.info()
    assert [d.index for d in info.devices] == [0, 1, 2]
    big, small, whole = info.devices
    assert big.uuid is not None
    assert big.uuid.startswith("MIG-")
    assert big.name == "Fake NVIDIA H200 MIG 3g.71gb"
    assert big.mem_total_bytes == 71 * GB
    assert small.mem_total_bytes == 18 * GB
    assert big.mig is not None
    assert small.mig is not None
    assert (big.mig.parent_index, big.mig.gpu_instance_id, big.mig.profile) == (0, 1, "3g.71gb")
    assert (small.mig.parent_index, small.mig.gpu_instance_id, small.mig.profile) == (
        0,
        3,
        "1g.18gb",
    )
    assert big.mig.parent_uuid == "GPU-fake0000-0000-4000-8000-000000000000"
    assert big.pci_bus_id == "00000000:18:00.0"  # its GPU's bus
    assert whole.mig is None
    assert whole.name == "Fake NVIDIA H200"
    assert info.to_dict()["devices"][0]["mig"]["profile"] == "3g.71gb"
    assert info.to_dict()["devices"][2]["mig"] is None


def test_a_mig_instance_has_memory_and_processes_but_no_utilization() -> None:
    fake = mig_fake()
    instance = fake.devices[0].mig_instances[0]
    assert instance is not None
    instance.compute = [(4242, 5 * GB)]
    backend = NvmlBackend(nvml=fake)
    big, small, whole = backend.read()
    for d in (big, small):
        assert d.state == "ok"  # memory reads: not an error, however much else is missing
        assert d.util_pct is None
        assert d.unavailable["util_pct"] == "Not Supported"
        assert d.unavailable["power_w"] == "Not Supported"
    assert big.mem_used_bytes == 71 * GB // 10
    assert big.mem_total_bytes == 71 * GB
    assert [(p.pid, p.used_mem_bytes) for p in big.processes] == [(4242, 5 * GB)]
    assert small.processes == ()
    assert whole.util_pct == 50.0
    assert "util_pct" not in whole.unavailable


def test_mig_mode_on_without_instances_shows_the_whole_gpu() -> None:
    fake = FakeNvml(devices=1)
    fake.enable_mig(0, [])
    backend = NvmlBackend(nvml=fake)
    (only,) = backend.info().devices
    assert only.mig is None
    assert only.name == "Fake NVIDIA H200"


def test_no_mig_support_is_a_whole_gpu() -> None:
    fake = FakeNvml(devices=1)
    fake.fail("nvmlDeviceGetMigMode", pynvml.NVML_ERROR_NOT_SUPPORTED)
    (only,) = NvmlBackend(nvml=fake).info().devices
    assert only.mig is None


def test_mig_instances_in_prometheus_carry_dcgm_labels() -> None:
    backend = NvmlBackend(nvml=mig_fake())
    info = backend.info()
    sample = Sample(1, 1.0, "nvml", False, None, backend.read(), HostReader().read())
    families = {f.name: f for f in text_string_to_metric_families(render_metrics(sample, info))}
    used = {
        s.labels["UUID"] + "/" + s.labels["GPU_I_ID"]: s
        for s in families["DCGM_FI_DEV_FB_USED"].samples
    }
    parent = "GPU-fake0000-0000-4000-8000-000000000000"
    assert set(used) == {f"{parent}/1", f"{parent}/3", "GPU-fake0000-0000-4000-8000-000000000001/"}
    assert used[f"{parent}/1"].labels["gpu"] == "0"
    assert used[f"{parent}/1"].labels["GPU_I_PROFILE"] == "3g.71gb"
    # No utilization for an instance: the series is left out, not 0.
    util = families["DCGM_FI_DEV_GPU_UTIL"].samples
    assert [s.labels["GPU_I_ID"] for s in util] == [""]
