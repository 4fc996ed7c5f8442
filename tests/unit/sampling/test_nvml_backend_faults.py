"""The NVML backend over a fake NVML: readings, units, and every fault as a value."""

from __future__ import annotations

import ctypes.util
import logging

import pynvml
import pytest

from jupyter_gpu.backends import open_backend
from jupyter_gpu.nvml.backend import LOST_MESSAGE, NvmlBackend, NvmlUnavailable
from jupyter_gpu.readings import NoGpuBackend
from tests.fakes.fake_nvml import FakeNvml


def test_reads_every_field_in_the_api_units() -> None:
    fake = FakeNvml(devices=2)
    fake.devices[1].compute = [(4242, 31_000_000_000)]
    fake.devices[1].graphics = [(4242, 31_000_000_000), (777, None)]
    backend = NvmlBackend(nvml=fake)

    info = backend.info()
    assert info.backend == "nvml"
    assert not info.simulated
    assert info.gpu_available
    assert info.driver_version == "580.159.04"
    assert info.cuda_driver_version == "13.0"
    assert [d.pci_bus_id for d in info.devices] == ["00000000:18:00.0", "00000000:19:00.0"]
    assert info.devices[0].power_limit_w == 700.0

    d0, d1 = backend.read()
    assert d0.state == "ok"
    assert d0.error is None
    assert (d0.util_pct, d0.mem_util_pct) == (50.0, 20.0)
    assert d0.mem_used_bytes == 1_000_000_000
    assert d0.mem_total_bytes == 150_754_820_096
    assert d0.power_w == 300.0  # NVML reports mW
    assert d0.power_limit_w == 700.0
    assert d0.temperature_c == 45.0
    assert d0.sm_clock_mhz == 1980
    assert d0.pcie_tx_bytes_per_s is None  # slow metrics are not part of the tick
    assert d0.unavailable == {}
    # compute and graphics lists are merged, one entry per pid
    assert [(p.pid, p.used_mem_bytes) for p in d1.processes] == [
        (4242, 31_000_000_000),
        (777, None),
    ]


def test_one_tick_is_one_batch_of_calls_without_the_slow_ones() -> None:
    fake = FakeNvml(devices=2)
    backend = NvmlBackend(nvml=fake)
    fake.calls.clear()
    backend.read()
    assert fake.calls["nvmlDeviceGetUtilizationRates"] == 2
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 0
    assert fake.calls["nvmlInit"] == 0
    assert fake.calls["nvmlDeviceGetHandleByIndex"] == 0  # handles are kept


def test_slow_read_converts_kib_to_bytes_and_reports_failures_as_reasons() -> None:
    fake = FakeNvml(devices=2)
    fake.fail("nvmlDeviceGetPcieThroughput", pynvml.NVML_ERROR_NOT_SUPPORTED, device=1)
    backend = NvmlBackend(nvml=fake)
    slow = backend.read_all("pcie")
    tx_rx = ("pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s")
    assert dict(slow[0].values) == dict(zip(tx_rx, (1000 * 1024.0, 2000 * 1024.0), strict=True))
    assert dict(slow[1].values) == {}
    assert dict(slow[1].unavailable) == dict.fromkeys(tx_rx, "Not Supported")
    # The device record says why, as it does for the fast readings.
    _, d1 = backend.read("pcie")
    assert (d1.pcie_tx_bytes_per_s, d1.unavailable["pcie_rx_bytes_per_s"]) == (
        None,
        "Not Supported",
    )


def test_power_not_supported_on_one_device_only() -> None:
    fake = FakeNvml(devices=2)
    fake.fail("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_NOT_SUPPORTED, device=1)
    d0, d1 = NvmlBackend(nvml=fake).read()
    assert d0.power_w == 300.0
    assert d0.unavailable == {}
    assert d1.power_w is None
    assert d1.unavailable == {"power_w": "Not Supported"}
    assert d1.state == "ok"  # one field missing is not a broken device
    assert d1.util_pct == 50.0


def test_a_gpu_lost_mid_run_is_a_state_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeNvml(devices=2)
    backend = NvmlBackend(nvml=fake)
    assert [d.state for d in backend.read()] == ["ok", "ok"]

    fake.lose(1)
    with caplog.at_level(logging.INFO, logger="jupyter_gpu"):
        for _ in range(5):
            d0, d1 = backend.read()
    assert d0.state == "ok"
    assert d0.util_pct == 50.0
    assert d1.state == "lost"
    assert d1.error == LOST_MESSAGE
    assert d1.util_pct is None
    assert d1.uuid == fake.devices[1].uuid  # still says which GPU it was
    lost_logs = [r for r in caplog.records if "is lost" in r.getMessage()]
    assert len(lost_logs) == 1
    assert not [r for r in caplog.records if r.exc_info]  # no traceback


def test_every_read_failing_is_the_error_state() -> None:
    fake = FakeNvml(devices=1)
    backend = NvmlBackend(nvml=fake)
    for fn in [name for name in dir(fake) if name.startswith("nvmlDeviceGet")]:
        fake.fail(fn, pynvml.NVML_ERROR_UNKNOWN, device=0)
    (d0,) = backend.read()
    assert d0.state == "error"
    assert d0.error == "NVML cannot read this GPU: Unknown Error"
    assert d0.unavailable["temperature_c"] == "Unknown Error"


def test_a_device_that_cannot_be_opened_is_lost_and_the_others_work() -> None:
    fake = FakeNvml(devices=2)
    fake.fail("nvmlDeviceGetHandleByIndex", pynvml.NVML_ERROR_GPU_IS_LOST, device=0)
    backend = NvmlBackend(nvml=fake)
    assert backend.info().devices[0].uuid is None
    d0, d1 = backend.read()
    assert d0.state == "lost"
    assert d1.state == "ok"


def test_a_device_nvml_refuses_to_open_is_an_error_with_the_reason() -> None:
    fake = FakeNvml(devices=2)
    fake.fail("nvmlDeviceGetHandleByIndex", pynvml.NVML_ERROR_NO_PERMISSION, device=1)
    _, d1 = NvmlBackend(nvml=fake).read()
    assert d1.state == "error"
    assert d1.error == "NVML cannot open this GPU: Insufficient Permissions"


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "NVIDIA driver is not loaded"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "No permission to use NVML (Insufficient Permissions)"),
        (pynvml.NVML_ERROR_UNKNOWN, "NVML failed to initialise: Unknown Error"),
    ],
)
def test_init_failure_is_the_none_backend_with_the_reason(code: int, reason: str) -> None:
    fake = FakeNvml(devices=2)
    fake.fail("nvmlInit", code)
    backend = open_backend("auto", nvml=fake)
    assert isinstance(backend, NoGpuBackend)
    info = backend.info()
    assert (info.backend, info.reason, info.gpu_available) == ("none", reason, False)
    assert backend.read() == ()


def test_zero_devices_is_no_gpu_and_nvml_is_released() -> None:
    fake = FakeNvml(devices=0)
    backend = open_backend("nvml", nvml=fake)
    assert backend.info().reason == "No NVIDIA GPU found"
    assert (fake.inits, fake.shutdowns) == (1, 1)


def test_count_failure_is_no_gpu_with_the_reason() -> None:
    fake = FakeNvml(devices=2)
    fake.fail("nvmlDeviceGetCount", pynvml.NVML_ERROR_UNKNOWN)
    with pytest.raises(NvmlUnavailable, match="could not count the GPUs: Unknown Error"):
        NvmlBackend(nvml=fake)
    assert fake.shutdowns == 1


def test_close_shuts_nvml_down_once() -> None:
    fake = FakeNvml(devices=1)
    backend = NvmlBackend(nvml=fake)
    backend.close()
    backend.close()
    assert (fake.inits, fake.shutdowns) == (1, 1)


def test_nvml_is_never_initialised_by_the_simulated_or_none_backends() -> None:
    fake = FakeNvml(devices=1)
    open_backend("simulated", nvml=fake)
    open_backend("none", nvml=fake)
    assert fake.inits == 0


def test_unknown_backend_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="backend must be one of auto, nvml, simulated, none"):
        open_backend("cuda")


@pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None, reason="this machine has NVML"
)
def test_real_pynvml_without_the_library_gives_the_reason() -> None:
    backend = open_backend("auto")
    assert backend.info().backend == "none"
    assert backend.info().reason == "NVML Shared Library Not Found"
