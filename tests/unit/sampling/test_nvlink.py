"""NVLink throughput: NVML's field values over a fake NVML, the sampler's group, Prometheus.

The counters are KiB since the driver loaded (``NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX``,
all links summed); a reading is the bytes per second between two reads. A GPU without an
active NVLink is a normal state, said as a reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pynvml
import pytest

from jupyter_gpu.backends import open_backend
from jupyter_gpu.nvml.backend import NvmlBackend
from jupyter_gpu.nvml.nvlink import NO_NVLINK
from jupyter_gpu.readings.records import DeviceSample, GroupReading
from jupyter_gpu.sampling import Sampler, SamplerOptions
from jupyter_gpu.server.metrics import render_metrics
from jupyter_gpu.simulated.backend import SimulatedBackend
from tests.fakes.fake_nvml import FakeNvml
from tests.helpers import wait_for

TX_RX = ("nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s")


class Streaming(FakeNvml):
    """A fake whose GPUs send 1,000,000 KiB/s and receive half that, on NVML's clock.

    Each read of the counters finds 0.1 s more of that traffic, however long the reads take
    here, so that the rates are exact on busy cores.
    """

    def nvmlDeviceGetFieldValues(self, handle: Any, field_ids: Any) -> Any:
        gpu = self.devices[handle.index]
        gpu.nvlink_tx_kib += 100_000
        gpu.nvlink_rx_kib += 50_000
        gpu.nvlink_at_us += 100_000
        return super().nvmlDeviceGetFieldValues(handle, field_ids)


def linked(devices: int = 2, links: int = 18) -> FakeNvml:
    """GPUs of an HGX board: every link up."""
    fake = FakeNvml(devices=devices)
    for d in fake.devices:
        d.nvlinks = links
    return fake


def read(backend: NvmlBackend, index: int) -> GroupReading | None:
    return backend.read_group("nvlink", index)


def test_a_reading_is_the_bytes_per_second_between_two_reads() -> None:
    fake = linked()
    backend = NvmlBackend(nvml=fake)
    gpu = fake.devices[0]
    gpu.nvlink_tx_kib, gpu.nvlink_rx_kib, gpu.nvlink_at_us = 1_000, 5_000, 10_000_000
    assert read(backend, 0) is None  # the first read opens the window
    # 2,000,000 KiB sent and 1,000,000 received in the 0.5 s between NVML's timestamps.
    gpu.nvlink_tx_kib += 2_000_000
    gpu.nvlink_rx_kib += 1_000_000
    gpu.nvlink_at_us += 500_000
    reading = read(backend, 0)
    assert reading is not None
    assert dict(reading.values) == {
        "nvlink_tx_bytes_per_s": 2_000_000 * 1024 / 0.5,
        "nvlink_rx_bytes_per_s": 1_000_000 * 1024 / 0.5,
    }
    assert dict(reading.unavailable) == {}
    # An idle link reads 0 B/s: a value, not a missing one.
    gpu.nvlink_at_us += 1_000_000
    idle = read(backend, 0)
    assert idle is not None
    assert dict(idle.values) == dict.fromkeys(TX_RX, 0.0)
    backend.close()


@pytest.mark.parametrize(
    ("links", "up", "reason"),
    [
        (0, None, f"{NO_NVLINK} (Not Supported)"),  # a PCIe GPU: NVML refuses the calls
        (18, 0, NO_NVLINK),  # a lone SXM GPU: its links are down
    ],
)
def test_a_gpu_without_nvlink_says_so_once(links: int, up: int | None, reason: str) -> None:
    fake = linked(devices=2)
    fake.devices[1].nvlinks = links
    fake.devices[1].nvlinks_up = up
    backend = NvmlBackend(nvml=fake)
    for _ in range(3):
        reading = read(backend, 1)
        assert reading is not None
        assert reading.values == {}
        assert dict(reading.unavailable) == dict.fromkeys(TX_RX, reason)
    asked = fake.calls["nvmlDeviceGetNvLinkState"]
    read(backend, 1)
    assert fake.calls["nvmlDeviceGetNvLinkState"] == asked  # decided at the first read
    assert fake.calls["nvmlDeviceGetFieldValues"] == 0  # never asked for counters it has not
    assert read(backend, 0) is None  # the other GPU's links are up: its window opens
    (_, d1) = backend.read("nvlink")
    assert d1.nvlink_tx_bytes_per_s is None
    assert d1.unavailable["nvlink_rx_bytes_per_s"] == reason
    backend.close()


def test_a_counter_that_goes_back_opens_a_new_window() -> None:
    fake = linked(devices=1)
    backend = NvmlBackend(nvml=fake)
    gpu = fake.devices[0]
    gpu.nvlink_tx_kib, gpu.nvlink_at_us = 9_000_000, 1_000_000
    read(backend, 0)
    gpu.nvlink_tx_kib, gpu.nvlink_at_us = 10, 2_000_000  # the driver reloaded
    assert read(backend, 0) is None  # no negative rate: the next window starts here
    gpu.nvlink_tx_kib, gpu.nvlink_at_us = 1_034, 3_000_000
    reading = read(backend, 0)
    assert reading is not None
    assert reading.values["nvlink_tx_bytes_per_s"] == 1024 * 1024.0
    backend.close()


def test_a_driver_without_the_fields_says_so() -> None:
    fake = linked(devices=1)
    fake.fail("nvmlDeviceGetFieldValues", pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
    backend = NvmlBackend(nvml=fake)
    reading = read(backend, 0)
    assert reading is not None
    assert set(reading.unavailable) == set(TX_RX)
    assert reading.unavailable["nvlink_tx_bytes_per_s"].startswith(f"{NO_NVLINK} (")
    backend.close()


@pytest.fixture
def sampler_of(tmp_path: Path) -> Iterator[Callable[..., Sampler]]:
    made: list[Sampler] = []

    def make(fake: FakeNvml, **options: object) -> Sampler:
        opts = SamplerOptions(**{"interval_s": 0.1, "gpm_metrics": False, **options})  # type: ignore[arg-type]
        sampler = Sampler(
            opts,
            backend_factory=lambda s: open_backend("nvml", nvml=fake, log=s.log),
            caches=(("inductor", str(tmp_path / "inductor")),),
        )
        made.append(sampler)
        sampler.start()
        return sampler

    yield make
    for sampler in made:
        sampler.stop()


def test_the_sampler_reads_the_group_behind_its_option(
    sampler_of: Callable[..., Sampler],
) -> None:
    fake = Streaming(devices=2)
    fake.devices[0].nvlinks = 18
    fake.devices[1].nvlinks = 0  # a GPU without NVLink beside one with
    sampler = sampler_of(fake, nvlink_metrics=True, nvlink_interval_s=0.2)

    def devices() -> tuple[DeviceSample, ...]:
        entry = sampler.latest()
        return entry.sample.devices if entry is not None else ()

    wait_for(lambda: bool(devices()) and devices()[0].nvlink_tx_bytes_per_s is not None)
    d0, d1 = devices()
    assert d0.nvlink_tx_bytes_per_s == 1_024_000_000  # KiB to bytes
    assert d0.nvlink_rx_bytes_per_s == 512_000_000
    assert d0.nvlink_age_s is not None
    assert "nvlink" not in d0.stale
    assert d1.nvlink_tx_bytes_per_s is None
    assert d1.unavailable["nvlink_tx_bytes_per_s"] == f"{NO_NVLINK} (Not Supported)"
    assert "jupyter-gpu-nvlink" in sampler.threads_alive()
    entry = sampler.latest()
    assert entry is not None
    info = sampler.info
    assert info is not None
    text = render_metrics(entry.sample, info)
    series = [
        line for line in text.splitlines() if line.startswith("DCGM_FI_PROF_NVLINK_TX_BYTES{")
    ]
    assert len(series) == 1  # GPU 0's; GPU 1 has no NVLink: no series, not a 0
    assert 'gpu="0"' in series[0]
    assert series[0].endswith(" 1.024e+09")


def test_off_by_default_no_thread_no_call(sampler_of: Callable[..., Sampler]) -> None:
    fake = linked(devices=1)
    sampler = sampler_of(fake)
    wait_for(lambda: len(sampler.history) >= 3)
    entry = sampler.latest()
    assert entry is not None
    (device,) = entry.sample.devices
    assert (device.nvlink_tx_bytes_per_s, device.nvlink_age_s) == (None, None)
    assert not [t for t in sampler.threads_alive() if "nvlink" in t]
    assert fake.calls["nvmlDeviceGetFieldValues"] == 0


def test_simulated_training_moves_data_over_nvlink_between_peers() -> None:
    clock = [0.0]
    board = SimulatedBackend(2, clock=lambda: clock[0])
    alone = SimulatedBackend(1, clock=lambda: clock[0])
    rates = []
    for t in range(0, 400, 3):  # past both jobs' loading and training phases
        clock[0] = float(t)
        reading = board.read_group("nvlink", 0)
        assert reading is not None
        rates.append(reading.values["nvlink_tx_bytes_per_s"])
        lone = alone.read_group("nvlink", 0)
        assert lone is not None
        assert lone.values["nvlink_tx_bytes_per_s"] == 0.0  # no peer, no traffic
    assert max(r or 0.0 for r in rates) > 10e9  # tens of GB/s while it trains
    assert min(r or 0.0 for r in rates) == 0.0  # and nothing while idle or evaluating
