"""The sampler thread over a fake NVML: cadence, history, faults while running, clean stop."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pynvml
import pytest

from jupyter_gpu.backends import open_backend
from jupyter_gpu.sampling import Entry, Sampler, SamplerOptions
from tests.fakes.fake_nvml import FakeNvml
from tests.helpers import wait_for

FAST = 0.1


@pytest.fixture
def make_sampler(tmp_path: Path) -> Iterator[Callable[..., Sampler]]:
    """Samplers over a fake NVML (or a named backend), stopped after the test."""
    made: list[Sampler] = []

    def make(fake: FakeNvml | None = None, **options: object) -> Sampler:
        # Each test passes SamplerOptions fields by name; mypy sees only their common type.
        opts = SamplerOptions(**{"interval_s": FAST, **options})  # type: ignore[arg-type]
        factory = None
        if fake is not None:

            def factory(s: Sampler) -> object:
                return open_backend("nvml", nvml=fake, log=s.log)

        sampler = Sampler(
            opts,
            encode=lambda s: f'{{"seq":{s.seq}}}',
            backend_factory=factory,  # type: ignore[arg-type]  # a Backend, typed object above
            caches=(("inductor", str(tmp_path / "inductor")), ("triton", str(tmp_path / "t"))),
        )
        made.append(sampler)
        return sampler

    yield make
    for sampler in made:
        sampler.stop()


def test_ticks_fill_the_history_in_order(make_sampler: Callable[..., Sampler]) -> None:
    sampler = make_sampler(FakeNvml(devices=2))
    sampler.start()
    wait_for(lambda: len(sampler.history) >= 5)
    entries = sampler.history.since()
    seqs = [e.sample.seq for e in entries]
    assert seqs == list(range(1, len(seqs) + 1))
    ts = [e.ts for e in entries]
    assert ts == sorted(ts)
    assert len(set(ts)) == len(ts)
    assert entries[-1].json == f'{{"seq":{seqs[-1]}}}'  # encoded once, in the sampler
    assert sampler.history.since(ts[2]) == entries[3:]
    latest = sampler.latest()
    assert latest is not None
    assert latest.sample.backend == "nvml"
    assert len(latest.sample.devices) == 2


def test_stop_leaves_no_thread_and_releases_nvml(make_sampler: Callable[..., Sampler]) -> None:
    fake = FakeNvml(devices=1)
    sampler = make_sampler(fake, slow_metrics=True, slow_interval_s=1.0)
    sampler.start()
    wait_for(lambda: sampler.ready.is_set())
    assert set(sampler.threads_alive()) == {
        "jupyter-gpu-sampler",
        "jupyter-gpu-cache-scan",
        "jupyter-gpu-slow",
        "jupyter-gpu-slow-read-0",
        "jupyter-gpu-gpm",
        "jupyter-gpu-gpm-read-0",
        "jupyter-gpu-read-0",
    }
    sampler.stop()
    assert sampler.threads_alive() == []
    assert not [t for t in threading.enumerate() if t.name.startswith("jupyter-gpu")]
    assert (fake.inits, fake.shutdowns) == (1, 1)


def test_a_gpu_lost_while_running_is_reported_and_sampling_goes_on(
    make_sampler: Callable[..., Sampler], caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeNvml(devices=2)
    sampler = make_sampler(fake)
    with caplog.at_level(logging.INFO, logger="jupyter_gpu"):
        sampler.start()
        wait_for(lambda: len(sampler.history) >= 2)
        fake.lose(0)
        lost_from = len(sampler.history) + 1
        wait_for(lambda: len(sampler.history) >= lost_from + 3)
    latest = sampler.latest()
    assert latest is not None
    assert [d.state for d in latest.sample.devices] == ["lost", "ok"]
    assert sampler.running
    assert not [r for r in caplog.records if r.exc_info]


def test_not_supported_power_on_one_device_in_every_sample(
    make_sampler: Callable[..., Sampler],
) -> None:
    fake = FakeNvml(devices=2)
    fake.fail("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_NOT_SUPPORTED, device=0)
    sampler = make_sampler(fake)
    sampler.start()
    wait_for(lambda: len(sampler.history) >= 3)
    for entry in sampler.history.since():
        d0, d1 = entry.sample.devices
        assert d0.power_w is None
        assert d0.unavailable == {"power_w": "Not Supported"}
        assert d1.power_w == 300.0


def test_init_failure_serves_host_metrics_with_the_reason(
    make_sampler: Callable[..., Sampler],
) -> None:
    fake = FakeNvml(devices=2)
    fake.fail("nvmlInit", pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    sampler = make_sampler(fake)
    sampler.start()
    wait_for(lambda: len(sampler.history) >= 2)
    sample = sampler.history.since()[-1].sample
    assert (sample.backend, sample.reason, sample.devices) == (
        "none",
        "NVIDIA driver is not loaded",
        (),
    )
    assert sample.host.mem_total_bytes is not None
    assert sample.host.mem_total_bytes > 0


def test_slow_reads_never_delay_the_tick(make_sampler: Callable[..., Sampler]) -> None:
    # Each slow run takes 2 devices x 2 counters x 0.25 s = 1 s; the tick must not wait for it.
    fake = FakeNvml(devices=2, pcie_delay_s=0.25)
    sampler = make_sampler(fake, slow_metrics=True, slow_interval_s=1.0)
    sampler.start()
    wait_for(lambda: sampler.ready.is_set())
    start = len(sampler.history)
    # The slow thread is busy all the time (1 s of reads per 1 s): ticks go on meanwhile. Waits
    # for them rather than counting in a fixed window, which 2 busy cores can starve.
    wait_for(lambda: len(sampler.history) - start >= 8, timeout_s=10.0)
    # latest() is None only before the first sample, and ready says there is one.
    wait_for(lambda: sampler.latest().sample.devices[0].pcie_tx_bytes_per_s is not None)  # type: ignore[union-attr]
    latest = sampler.latest()
    assert latest is not None
    assert latest.sample.devices[0].pcie_rx_bytes_per_s == 2000 * 1024.0


def test_a_failing_tick_is_logged_once_and_sampling_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    calls = {"n": 0}

    def flaky_encode(sample: object) -> str:
        calls["n"] += 1
        if calls["n"] % 2:
            raise RuntimeError("boom")
        return "{}"

    sampler = Sampler(
        SamplerOptions(backend="simulated", interval_s=FAST),
        encode=flaky_encode,
        caches=(),
    )
    with caplog.at_level(logging.ERROR, logger="jupyter_gpu"):
        sampler.start()
        try:
            wait_for(lambda: calls["n"] >= 6)
        finally:
            sampler.stop()
    assert len(sampler.history) >= 2
    assert len([r for r in caplog.records if "tick failed" in r.getMessage()]) == 1
    # a failed tick is no sample and leaves no gap: seq still counts samples by exactly 1
    seqs = [e.sample.seq for e in sampler.history.since()]
    assert seqs == list(range(1, len(seqs) + 1))


def test_seq_restarts_from_one_in_a_new_sampler(make_sampler: Callable[..., Sampler]) -> None:
    # A server restart is a new sampler: seq goes back to 1 (the frontend reloads on that).
    first = make_sampler(backend="simulated")
    first.start()
    wait_for(lambda: len(first.history) >= 3)
    first.stop()
    second = make_sampler(backend="simulated")
    second.start()
    wait_for(lambda: len(second.history) >= 1)
    assert second.history.since()[0].sample.seq == 1
    latest = first.latest()
    assert latest is not None
    assert latest.sample.seq >= 3


def test_a_lost_gpu_gets_no_stale_slow_readings(make_sampler: Callable[..., Sampler]) -> None:
    fake = FakeNvml(devices=2)
    sampler = make_sampler(fake, slow_metrics=True, slow_interval_s=60.0)
    sampler.start()
    wait_for(sampler.ready.is_set)
    # latest() is None only before the first sample, and ready says there is one.
    wait_for(lambda: sampler.latest().sample.devices[0].pcie_rx_bytes_per_s is not None)  # type: ignore[union-attr]
    fake.lose(0)  # the slow reading stays the one from before, for a minute
    wait_for(lambda: sampler.latest().sample.devices[0].state == "lost")  # type: ignore[union-attr]
    latest = sampler.latest()
    assert latest is not None
    lost, alive = latest.sample.devices
    assert (lost.pcie_tx_bytes_per_s, lost.pcie_rx_bytes_per_s) == (None, None)
    assert alive.pcie_rx_bytes_per_s == 2000 * 1024.0


def test_backend_that_cannot_open_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_sampler: Sampler) -> object:
        raise OSError("bug in a backend")

    # broken never returns (typed object): a factory that raises.
    sampler = Sampler(SamplerOptions(interval_s=FAST), backend_factory=broken, caches=())  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, logger="jupyter_gpu"):
        sampler.start()
        # The host is still sampled, with the reason there is no GPU.
        wait_for(lambda: (e := sampler.latest()) is not None and e.sample.reason is not None)
        assert sampler.running
        sampler.stop()
    sample = sampler.latest().sample  # type: ignore[union-attr]
    assert (sample.backend, sample.devices, sample.nvml_wait_s) == ("none", (), None)
    assert "failed to open (bug in a backend)" in str(sample.reason)
    assert sample.host.mem_total_bytes
    assert caplog.text.count("could not open the GPU backend") == 1
    assert sampler.threads_alive() == []


def test_on_sample_gets_every_entry(make_sampler: Callable[..., Sampler]) -> None:
    got: list[Entry] = []
    sampler = Sampler(
        SamplerOptions(backend="simulated", interval_s=FAST, simulated_devices=3),
        on_sample=got.append,
        caches=(),
    )
    sampler.start()
    try:
        wait_for(lambda: len(got) >= 3)
    finally:
        sampler.stop()
    assert [e.sample.seq for e in got] == list(range(1, len(got) + 1))
    assert all(e.sample.simulated for e in got)
    assert len(got[0].sample.devices) == 3


def test_interval_below_a_tenth_of_a_second_is_refused() -> None:
    with pytest.raises(ValueError, match=r"at least 0\.01 s"):
        Sampler(SamplerOptions(interval_s=0.005))


def test_history_capacity_follows_history_and_interval() -> None:
    assert SamplerOptions().history_capacity == 600
    assert SamplerOptions(interval_s=0.1, history_s=60).history_capacity == 600
    sampler = Sampler(SamplerOptions(interval_s=0.5, history_s=2.0), caches=())
    assert sampler.history.capacity == 4


def test_a_periodic_run_that_outlasts_its_interval_is_not_followed_back_to_back() -> None:
    import itertools

    from jupyter_gpu.sampling.periodic import Periodic

    spans: list[tuple[float, float]] = []

    def slow(_stop: threading.Event) -> int:
        start = time.monotonic()
        time.sleep(0.3)  # longer than the interval
        spans.append((start, time.monotonic()))
        return len(spans)

    periodic = Periodic("test-slow", 0.2, slow, 0, logging.getLogger("test"))
    periodic.start()
    try:
        wait_for(lambda: len(spans) >= 3)
    finally:
        periodic.stop()
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start - end >= 0.2 - 0.01  # a whole interval of rest after a long run
