"""NVML that hangs while starting (``nvmlInit``, ``nvmlDeviceGetCount``): the monitor goes on.

The server's sampler serves the host and the caches within a second or so, says "NVML has not
answered for N s" (in the sample, its info and the log, once), and takes the GPUs in when NVML
answers; the kernel's one-shot reads (``%%torchrun``'s GPU count, ``%gpu --topology``) answer
within their deadline and never send a second thread into the hung call. Over the fake NVML,
whose ``hang(None, calls=...)`` blocks those calls until ``release(None)``; and the simulated
backend's ``hang:init`` fault. Each wait is on a state, with a generous timeout.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpu.backends import open_backend
from jupyter_gpu.nvml.topology import gpu_count, read_topology
from jupyter_gpu.readings.records import Sample
from jupyter_gpu.sampling import Sampler, SamplerOptions
from jupyter_gpu.simulated.faults import parse_faults
from tests.fakes.fake_nvml import FakeNvml
from tests.helpers import wait_for

DEADLINE = 0.3


def latest(sampler: Sampler) -> Sample:
    entry = sampler.latest()
    assert entry is not None
    return entry.sample


@pytest.fixture
def hung() -> Iterator[Callable[[str], FakeNvml]]:
    """A fake NVML whose start-up call ``name`` hangs; released after the test."""
    fakes: list[FakeNvml] = []

    def make(name: str) -> FakeNvml:
        fake = FakeNvml(devices=2)
        fake.hang(None, calls={name})
        fakes.append(fake)
        return fake

    yield make
    for fake in fakes:
        fake.release(None)
    wait_for(
        lambda: not [t for t in threading.enumerate() if t.name.startswith("jupyter-gpu")],
        "a start-up thread is still in its call",
    )


def start(fake: FakeNvml, tmp_path: Path, **options: Any) -> Sampler:
    sampler = Sampler(
        SamplerOptions(
            **{"interval_s": 0.1, "read_deadline_s": DEADLINE, "gpm_metrics": False, **options}
        ),
        encode=lambda s: "",
        backend_factory=lambda s: open_backend("nvml", nvml=fake, log=s.log, deadline_s=DEADLINE),
        caches=(("inductor", str(tmp_path / "i")),),
    )
    sampler.start()
    return sampler


@pytest.mark.parametrize("call", ["nvmlInit", "nvmlDeviceGetCount"])
def test_the_host_is_served_at_once_and_the_gpus_come_when_nvml_answers(
    call: str,
    hung: Callable[[str], FakeNvml],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = hung(call)
    with caplog.at_level(logging.INFO, logger="jupyter_gpu"):
        began = time.monotonic()
        sampler = start(fake, tmp_path)
        try:
            wait_for(sampler.ready.is_set, "no first sample", timeout_s=10)
            first_after = time.monotonic() - began
            waiting = latest(sampler)
            assert (waiting.backend, waiting.devices) == ("nvml", ())
            assert waiting.nvml_wait_s is not None
            assert str(waiting.reason).startswith("NVML has not answered for ")
            assert waiting.host.mem_total_bytes  # the host's readings, without the GPUs
            info = sampler.info
            assert info is not None
            assert (info.devices, info.gpu_available) == ((), False)
            assert info.nvml_wait_s is not None
            # The wait grows in the samples; the log says it once, past the read deadline.
            wait_for(lambda: (latest(sampler).nvml_wait_s or 0) > 3 * DEADLINE)
            said = [r for r in caplog.records if "has not answered" in r.getMessage()]
            assert len(said) == 1
            assert fake.calls[call] == 1  # one thread in the hung call, not one per tick
            fake.release(None)
            wait_for(lambda: len(latest(sampler).devices) == 2, "the GPUs did not come in")
            opened = latest(sampler)
            assert (opened.nvml_wait_s, opened.reason) == (None, None)
            assert [d.state for d in opened.devices] == ["ok", "ok"]
            info = sampler.info
            assert info is not None
            assert (info.nvml_wait_s, len(info.devices)) == (None, 2)
            assert sum("NVML answered after" in r.getMessage() for r in caplog.records) == 1
            seqs = [e.sample.seq for e in sampler.history.since()]
            assert seqs == list(range(1, len(seqs) + 1))  # one run of samples, no restart
        finally:
            sampler.stop()
    # The first sample came after the open wait (a second at most), not after NVML answered.
    assert first_after < 2.0


def test_stop_leaves_the_hung_open_and_its_late_backend_is_closed(
    hung: Callable[[str], FakeNvml], tmp_path: Path
) -> None:
    fake = hung("nvmlInit")
    sampler = start(fake, tmp_path)
    wait_for(sampler.ready.is_set, timeout_s=10)
    began = time.monotonic()
    sampler.stop(timeout=1.0)
    assert time.monotonic() - began < 1.5  # stop keeps its timeout
    assert sampler.threads_alive() == ["jupyter-gpu-open"]  # the thread in nvmlInit
    fake.release(None)
    wait_for(lambda: sampler.threads_alive() == [])
    # The backend opened after the stop is closed by that thread: NVML is shut down.
    wait_for(lambda: (fake.inits, fake.shutdowns) == (1, 1), lambda: str(fake.calls))


def test_a_simulated_start_up_hang_ends_on_its_schedule(tmp_path: Path) -> None:
    options = SamplerOptions(
        backend="simulated",
        interval_s=0.1,
        read_deadline_s=DEADLINE,
        simulated_faults=parse_faults(["hang:init@0-1.5"]),
    )
    sampler = Sampler(options, caches=(("inductor", str(tmp_path / "i")),))
    sampler.start()
    try:
        wait_for(sampler.ready.is_set, timeout_s=10)
        waiting = latest(sampler)
        assert (waiting.backend, waiting.simulated, waiting.devices) == ("simulated", True, ())
        assert str(waiting.reason).startswith("Simulated fault (hang:init")
        assert "NVML has not answered for" in str(waiting.reason)
        wait_for(lambda: len(latest(sampler).devices) == 2, timeout_s=15)
        assert latest(sampler).nvml_wait_s is None
    finally:
        sampler.stop()
    assert sampler.threads_alive() == []


def test_a_simulated_start_up_hang_without_end_ends_with_the_server(tmp_path: Path) -> None:
    options = SamplerOptions(
        backend="simulated", interval_s=0.1, simulated_faults=parse_faults(["hang:init"])
    )
    sampler = Sampler(options, caches=())
    sampler.start()
    wait_for(sampler.ready.is_set, timeout_s=10)
    assert latest(sampler).nvml_wait_s is not None
    sampler.stop(timeout=2.0)
    wait_for(lambda: sampler.threads_alive() == [])


def test_the_gpu_count_answers_within_its_deadline_and_sends_one_thread(
    hung: Callable[[str], FakeNvml],
) -> None:
    fake = hung("nvmlInit")
    for _ in range(2):  # the second waits for the first's call, and sends none of its own
        began = time.monotonic()
        count, reason = gpu_count(nvml=fake, deadline_s=DEADLINE)
        assert time.monotonic() - began < DEADLINE + 1.0
        assert count == 0
        assert str(reason).startswith(f"NVML did not answer within {DEADLINE:g} s while starting")
    assert fake.calls["nvmlInit"] == 1
    topology = read_topology(fake, deadline_s=DEADLINE)  # %gpu --topology: the same wait
    assert topology.gpus == ()
    assert "did not answer" in str(topology.reason)
    assert fake.calls["nvmlInit"] == 1
    fake.release(None)
    wait_for(lambda: gpu_count(nvml=fake, deadline_s=DEADLINE) == (2, None))
    wait_for(lambda: fake.inits == fake.shutdowns)  # the late answer shut NVML down too
