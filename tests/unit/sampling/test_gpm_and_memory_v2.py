"""GPM (SM/tensor/DRAM activity) and NVML v2 memory: over the fake NVML and simulated."""

from __future__ import annotations

import pynvml
import pytest

from jupyter_gpu.nvml.backend import NvmlBackend
from jupyter_gpu.nvml.gpm import GPM_FIELDS, GpmReader
from jupyter_gpu.sampling import Sampler, SamplerOptions, read_once
from jupyter_gpu.simulated.backend import SimulatedBackend
from tests.fakes.fake_nvml import FakeNvml


def test_gpm_needs_two_samples_then_reads_the_four_metrics() -> None:
    fake = FakeNvml(devices=1)
    backend = NvmlBackend(nvml=fake)
    assert backend.read_all("gpm") == {}  # the first read opens the window
    reading = backend.read_all("gpm")[0]
    assert dict(reading.values) == {
        "sm_active_pct": 78.0,
        "sm_occupancy_pct": 14.0,
        "tensor_active_pct": 72.0,
        "dram_bw_pct": 18.0,
    }
    assert dict(reading.unavailable) == {}
    (device,) = backend.read("gpm")
    assert (device.sm_active_pct, device.tensor_active_pct) == (78.0, 72.0)
    assert device.to_dict()["dram_bw_pct"] == 18.0
    backend.close()


def test_gpm_reuses_two_buffers_per_gpu_and_frees_them_on_close() -> None:
    fake = FakeNvml(devices=2)
    backend = NvmlBackend(nvml=fake)
    for _ in range(20):
        backend.read_all("gpm")
    assert len(fake.gpm_samples) == 4  # two per GPU, swapped, not one per read
    backend.close()
    assert all(s.freed for s in fake.gpm_samples)
    assert backend.read_all("gpm") == {}  # closed: nothing, no raise


def test_older_gpu_says_not_supported_and_is_asked_once() -> None:
    fake = FakeNvml(devices=2)
    fake.devices[1].gpm = False  # an A100: no GPM
    backend = NvmlBackend(nvml=fake)
    backend.read_all("gpm")
    readings = backend.read_all("gpm")
    backend.read_all("gpm")
    assert readings[1].values == {}
    assert dict(readings[1].unavailable) == dict.fromkeys(GPM_FIELDS, "Not Supported")
    assert fake.calls["nvmlGpmQueryDeviceSupport"] == 2  # once per GPU, not per read
    d0, d1 = backend.read("gpm")  # a third window
    assert d0.sm_active_pct == 78.0
    assert d1.sm_active_pct is None
    assert d1.unavailable["tensor_active_pct"] == "Not Supported"
    backend.close()


def test_one_metric_refused_and_failures_become_values() -> None:
    fake = FakeNvml(devices=1)
    del fake.devices[0].gpm_values["dram_bw_pct"]
    backend = NvmlBackend(nvml=fake)
    backend.read_all("gpm")
    reading = backend.read_all("gpm")[0]
    assert "dram_bw_pct" not in reading.values
    assert reading.unavailable["dram_bw_pct"] == "Not Supported"
    fake.fail("nvmlGpmSampleGet", pynvml.NVML_ERROR_UNKNOWN)
    assert backend.read_all("gpm") == {}  # a failed sample: no window, no raise
    fake.heal("nvmlGpmSampleGet")
    assert backend.read_all("gpm") == {}  # the window starts again
    assert 0 in backend.read_all("gpm")
    backend.close()


def test_query_support_failing_says_why() -> None:
    fake = FakeNvml(devices=1)
    fake.fail("nvmlGpmQueryDeviceSupport", pynvml.NVML_ERROR_NO_PERMISSION)
    reader = GpmReader(fake, [pynvml_handle(fake, 0)])
    reading = reader.read(0)
    assert reading is not None
    assert set(reading.unavailable.values()) == {"Insufficient Permissions"}


def pynvml_handle(fake: FakeNvml, index: int) -> object:
    return fake.nvmlDeviceGetHandleByIndex(index)


def test_gpm_values_clamped_to_percent() -> None:
    fake = FakeNvml(devices=1)
    fake.devices[0].gpm_values["sm_active_pct"] = 100.4
    fake.devices[0].gpm_values["dram_bw_pct"] = -0.1
    backend = NvmlBackend(nvml=fake)
    backend.read_all("gpm")
    reading = backend.read_all("gpm")[0]
    assert reading.values["sm_active_pct"] == 100.0
    assert reading.values["dram_bw_pct"] == 0.0
    backend.close()


def test_sampler_merges_gpm_from_its_own_thread() -> None:
    fake = FakeNvml(devices=1)
    options = SamplerOptions(interval_s=0.1, gpm_interval_s=0.1, cache_scan_interval_s=3600)
    sampler = Sampler(options, backend_factory=lambda _s: NvmlBackend(nvml=fake), caches=())
    sampler.start()
    try:
        assert sampler.ready.wait(5)
        assert "jupyter-gpu-gpm" in sampler.threads_alive()
        device = None
        for _ in range(50):
            entry = sampler.latest()
            assert entry is not None
            device = entry.sample.devices[0]
            if device.tensor_active_pct is not None:
                break
            sampler._stop.wait(0.1)
        assert device is not None
        assert device.tensor_active_pct == 72.0
    finally:
        sampler.stop()
    assert sampler.threads_alive() == []
    assert all(s.freed for s in fake.gpm_samples)


def test_sampler_without_gpm_option_starts_no_thread() -> None:
    fake = FakeNvml(devices=1)
    options = SamplerOptions(interval_s=0.1, gpm_metrics=False, cache_scan_interval_s=3600)
    sampler = Sampler(options, backend_factory=lambda _s: NvmlBackend(nvml=fake), caches=())
    sampler.start()
    try:
        assert sampler.ready.wait(5)
        assert "jupyter-gpu-gpm" not in sampler.threads_alive()
    finally:
        sampler.stop()
    assert fake.calls["nvmlGpmSampleGet"] == 0


def test_simulated_gpm_is_plausible_and_follows_load() -> None:
    now = [1000.0]
    backend = SimulatedBackend(2, clock=lambda: now[0])
    seen_busy = seen_idle = False
    for step in range(400):
        now[0] = 1000.0 + step
        util = {d.index: d.util_pct for d in backend.read()}
        for index, reading in backend.read_all("gpm").items():
            v = reading.values
            assert set(v) == set(GPM_FIELDS)
            assert all(0.0 <= x <= 100.0 for x in v.values())
            assert v["sm_active_pct"] <= (util[index] or 0) + 1.0  # SM active <= "a kernel ran"
            if (util[index] or 0) > 80:
                seen_busy = True
                assert v["tensor_active_pct"] > 50
            if (util[index] or 0) < 3:
                seen_idle = True
                assert v["tensor_active_pct"] < 5
    assert seen_busy
    assert seen_idle


def test_read_once_fills_gpm_for_simulated() -> None:
    sample = read_once("simulated")
    assert all(d.sm_active_pct is not None for d in sample.devices)


def test_simulated_unsupported_fault_wins_over_gpm() -> None:
    from jupyter_gpu.simulated import parse_faults

    backend = SimulatedBackend(1, faults=parse_faults(["unsupported:0:tensor_active_pct"]))
    (device,) = backend.read("gpm")
    assert device.tensor_active_pct is None
    assert device.unavailable["tensor_active_pct"] == "Not Supported (simulated)"
    assert device.sm_active_pct is not None


# -- memory v2


def test_memory_used_is_v2_which_leaves_out_reserved_memory() -> None:
    fake = FakeNvml(devices=1)
    fake.devices[0].mem_used = 11_290_000_000
    fake.devices[0].mem_reserved = 645_000_000
    (device,) = NvmlBackend(nvml=fake).read()
    assert device.mem_used_bytes == 11_290_000_000  # nvidia-smi's figure, not v1's
    assert fake.calls["nvmlDeviceGetMemoryInfo_v2"] == 1


@pytest.mark.parametrize(
    "code",
    [
        pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
        pynvml.NVML_ERROR_NOT_SUPPORTED,
        pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
    ],
)
def test_memory_falls_back_to_v1_once_where_v2_is_missing(code: int) -> None:
    fake = FakeNvml(devices=2)
    fake.fail("nvmlDeviceGetMemoryInfo_v2", code, device=1)
    backend = NvmlBackend(nvml=fake)
    for _ in range(3):
        d0, d1 = backend.read()
    assert d0.mem_used_bytes == 1_000_000_000
    assert d1.mem_used_bytes == 1_600_000_000  # v1: used + reserved
    assert "mem_used_bytes" not in d1.unavailable
    assert fake.calls["nvmlDeviceGetMemoryInfo_v2"] == 3 + 1  # GPU 1 asked once, GPU 0 each time


def test_memory_v2_other_errors_are_values_not_a_fallback() -> None:
    fake = FakeNvml(devices=1)
    fake.fail("nvmlDeviceGetMemoryInfo_v2", pynvml.NVML_ERROR_UNKNOWN)
    backend = NvmlBackend(nvml=fake)
    (device,) = backend.read()
    assert device.mem_used_bytes is None
    assert device.unavailable["mem_used_bytes"] == "Unknown Error"
    fake.heal("nvmlDeviceGetMemoryInfo_v2")
    (device,) = backend.read()
    assert device.mem_used_bytes == 1_000_000_000


def test_memory_v1_when_nvidia_ml_py_has_no_v2() -> None:
    fake = FakeNvml(devices=1)
    fake.nvmlMemory_v2 = None  # type: ignore[assignment]  # an nvidia-ml-py from before v2
    (device,) = NvmlBackend(nvml=fake).read()
    assert device.mem_used_bytes == 1_600_000_000
