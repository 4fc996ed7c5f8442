"""A hung NVML call: the device turns "not responding", the others and the tick carry on.

Every reading is behind the per-GPU deadline (the fast tick, GPM, PCIe) and carries its age; a
stale one is null and named in ``stale``; ``stop`` keeps to its timeout. Over the fake NVML,
whose ``hang(gpu)`` makes every call on that GPU block until ``release`` (``hang(gpu, calls=)``
only some). No assertion depends on how fast the machine is: each waits for a state, with a
generous timeout, thread counts are checked while the hang lasts, and what is checked of ages
holds whatever the delays.
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
from jupyter_gpu.readings.deadline import DeviceReader
from jupyter_gpu.readings.records import DeviceInfo, DeviceSample
from jupyter_gpu.sampling import Sampler, SamplerOptions
from jupyter_gpu.sampling.freshness import StaleAfter
from jupyter_gpu.simulated.backend import SimulatedBackend
from jupyter_gpu.simulated.faults import parse_fault
from tests.fakes.fake_nvml import FakeNvml
from tests.helpers import wait_for

DEADLINE = 0.3


def device(sampler: Sampler, index: int) -> DeviceSample:
    entry = sampler.latest()
    assert entry is not None
    return entry.sample.devices[index]


def readers(sampler: Sampler) -> list[str]:
    return [name for name in sampler.threads_alive() if name.startswith("jupyter-gpu-read")]


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Callable[..., Sampler]]:
    """Start a sampler over a fake NVML (more ``SamplerOptions`` by name); stopped after."""
    made: list[tuple[Sampler, FakeNvml]] = []

    def start(fake: FakeNvml, **options: Any) -> Sampler:
        sampler = Sampler(
            SamplerOptions(
                **{"interval_s": 0.1, "read_deadline_s": DEADLINE, "gpm_metrics": False, **options}
            ),
            encode=lambda s: "",
            backend_factory=lambda s: open_backend("nvml", nvml=fake, log=s.log),
            caches=(("inductor", str(tmp_path / "i")),),
        )
        made.append((sampler, fake))
        sampler.start()
        wait_for(sampler.ready.is_set)
        return sampler

    yield start
    for sampler, fake in made:
        for i in range(len(fake.devices)):
            fake.release(i)
        sampler.stop()


def test_a_hung_gpu_turns_not_responding_while_the_others_update(
    started: Callable[[FakeNvml], Sampler], caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeNvml(devices=3)
    sampler = started(fake)
    assert [d.state for d in sampler.latest().sample.devices] == ["ok"] * 3  # type: ignore[union-attr]
    fake.hang(1)
    wait_for(lambda: device(sampler, 1).state == "not_responding")
    hung = device(sampler, 1)
    assert hung.util_pct is None
    assert hung.mem_total_bytes == fake.devices[1].mem_total
    assert hung.stale_s is not None
    assert hung.error is not None
    assert "has not answered" in hung.error
    # Logged by the round that first finds the call past its deadline: that round's sample, or
    # the next one (a round can end just before the deadline and still show the device hung).
    wait_for(lambda: any("has not returned" in r.getMessage() for r in caplog.records))

    # The others keep updating, and so does the tick, while GPU 1's call stays blocked.
    for util in (11, 22, 33):
        fake.devices[0].util = fake.devices[2].util = util
        wait_for(lambda u=util: device(sampler, 0).util_pct == u)  # type: ignore[misc]
        assert device(sampler, 2).util_pct == util
    seq = sampler.latest().sample.seq  # type: ignore[union-attr]
    wait_for(lambda: sampler.latest().sample.seq >= seq + 10)  # type: ignore[union-attr]
    stale = device(sampler, 1).stale_s
    assert stale is not None
    assert hung.stale_s is not None
    assert stale > hung.stale_s  # how long, growing
    # One worker per GPU, GPU 1's stuck in its call: never a thread per tick.
    assert len(readers(sampler)) == 3
    assert fake.hung_calls == 1  # the hung GPU is not asked again while its call is out
    assert sampler.device_answer_age_s()[1] is not None

    fake.release(1)
    wait_for(lambda: device(sampler, 1).state == "ok")
    assert device(sampler, 1).stale_s is None
    assert device(sampler, 1).util_pct == 50.0
    assert len(readers(sampler)) == 3  # GPU 1's worker serves it again
    assert any("answers again" in r.getMessage() for r in caplog.records)


def test_hangs_never_add_threads(started: Callable[[FakeNvml], Sampler]) -> None:
    fake = FakeNvml(devices=2)
    sampler = started(fake)
    for _ in range(3):  # hang, recover, hang again: threads never pile up
        fake.hang(0)
        fake.hang(1)
        wait_for(lambda: {d.state for d in sampler.latest().sample.devices} == {"not_responding"})  # type: ignore[union-attr]
        seq = sampler.latest().sample.seq  # type: ignore[union-attr]
        wait_for(lambda s=seq: sampler.latest().sample.seq >= s + 5)  # type: ignore[misc, union-attr]
        assert len(readers(sampler)) == 2  # one per GPU, each stuck in its call
        fake.release(0)
        fake.release(1)
        wait_for(lambda: {d.state for d in sampler.latest().sample.devices} == {"ok"})  # type: ignore[union-attr]
    assert len(readers(sampler)) == 2


def test_stop_does_not_wait_for_a_hung_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeNvml(devices=1)
    sampler = Sampler(
        SamplerOptions(interval_s=0.1, read_deadline_s=DEADLINE, gpm_metrics=False),
        backend_factory=lambda s: open_backend("nvml", nvml=fake, log=s.log),
        caches=(),
    )
    sampler.start()
    wait_for(sampler.ready.is_set)
    fake.hang(0)
    wait_for(lambda: device(sampler, 0).state == "not_responding")
    start = time.monotonic()
    sampler.stop()
    assert time.monotonic() - start < 3.0
    assert "jupyter-gpu-sampler" not in sampler.threads_alive()
    assert fake.shutdowns == 0  # nvmlShutdown could block on the hung call: not called
    assert any("NVML left open" in r.getMessage() for r in caplog.records)
    fake.release(0)
    wait_for(lambda: fake.shutdowns == 1)  # by the hung call, once it returned
    wait_for(lambda: sampler.threads_alive() == [])


def test_a_hung_device_never_delays_the_others() -> None:
    gate = threading.Event()
    infos = [DeviceInfo(i, f"GPU-{i}", "Test", 1, 1.0, None) for i in range(3)]

    def read_one(index: int) -> DeviceSample:
        if index == 1:
            gate.wait()
        return DeviceSample(index, f"GPU-{index}", "Test", util_pct=float(index))

    reader = DeviceReader(infos, read_one, 0.05, logging.getLogger("test"))
    try:
        first = reader.read(0.5)
        # GPU 2 is read beside GPU 1, not after it: it answers in the very first read.
        assert [d.state for d, _ in first] == ["ok", "not_responding", "ok"]
        assert first[1][0].stale_s is not None
        assert first[1][1] is None  # never answered: no reading time
        for _ in range(30):
            states = [d.state for d, _ in reader.read(0.02)]
        assert states == ["ok", "not_responding", "ok"]
        assert len(reader.thread_names()) == 3
        gate.set()
        wait_for(lambda: [d.state for d, _ in reader.read(0.05)] == ["ok", "ok", "ok"])
        assert len(reader.thread_names()) == 3
    finally:
        gate.set()
        reader.close()
    wait_for(lambda: reader.thread_names() == [])


def test_a_backend_bug_in_a_read_is_an_error_state_not_a_dead_worker() -> None:
    infos = [DeviceInfo(0, "GPU-0", "Test", 1, 1.0, None)]

    def read_one(index: int) -> DeviceSample:
        raise RuntimeError("boom")

    reader = DeviceReader(infos, read_one, 1.0, logging.getLogger("test"))
    try:
        for _ in range(3):
            ((d, at),) = reader.read(1.0)
            assert d.state == "error"
            assert d.error == "reading failed: boom"
            assert at is not None
    finally:
        reader.close()


def test_the_simulated_hang_fault_blocks_until_it_ends() -> None:
    fault = parse_fault("hang:1@0-0.5")
    assert (fault.kind, fault.gpu, fault.start_s, fault.end_s) == ("hang", 1, 0.0, 0.5)
    backend = SimulatedBackend(2, faults=[fault])
    start = time.monotonic()
    d = backend.read_group("fast", 1)
    assert time.monotonic() - start >= 0.3
    assert d.state == "ok"  # it answers once the fault is over
    assert backend.read_group("fast", 0).state == "ok"
    backend.close()


def started_simulated(fault: str, **options: Any) -> Sampler:
    """A running sampler of 2 simulated GPUs with ``fault``, past its first sample."""
    sampler = Sampler(
        SamplerOptions(
            backend="simulated",
            simulated_devices=2,
            interval_s=0.1,
            read_deadline_s=DEADLINE,
            simulated_faults=(parse_fault(fault),),
            **options,
        ),
        encode=lambda s: "",
        caches=(),
    )
    sampler.start()
    wait_for(lambda: sampler.latest() is not None)
    return sampler


def test_a_simulated_hang_makes_only_that_gpu_not_respond(tmp_path: Path) -> None:
    sampler = started_simulated("hang:1@0.5-2.5")
    try:
        wait_for(lambda: device(sampler, 1).state == "not_responding")
        assert device(sampler, 0).state == "ok"
        power = {device(sampler, 0).power_w}
        wait_for(lambda: power.add(device(sampler, 0).power_w) or len(power) > 2)  # type: ignore[func-returns-value]
        wait_for(lambda: device(sampler, 1).state == "ok")
    finally:
        sampler.stop()
    assert sampler.threads_alive() == []


# -- GPM and PCIe behind the deadline; ages and staleness; stop's timeout

GPM_S = 0.1  # gpm_interval_s and slow_interval_s of these samplers
STALE_S = StaleAfter.two_intervals({"gpm": GPM_S}).limit_s("gpm")  # MIN_STALE_S: 1 s
EVERY_READING: dict[str, Any] = {"gpm_metrics": True, "gpm_interval_s": GPM_S}
EVERY_READING_SLOW: dict[str, Any] = {
    **EVERY_READING,
    "slow_metrics": True,
    "slow_interval_s": GPM_S,
}


def sampled_after(sampler: Sampler, wall: float) -> list[DeviceSample]:
    """GPU 0's and 2's records in every sample taken after ``wall`` (Unix time)."""
    return [
        d
        for entry in sampler.history.since(wall)
        for d in entry.sample.devices
        if d.index != 1 and entry.sample.ts > wall
    ]


def test_one_hung_gpu_never_freezes_the_others_gpm_and_pcie(
    started: Callable[..., Sampler],
) -> None:
    fake = FakeNvml(devices=3)
    sampler = started(fake, **EVERY_READING_SLOW)
    wait_for(lambda: device(sampler, 2).sm_active_pct == 78.0)
    wait_for(lambda: device(sampler, 2).pcie_tx_bytes_per_s == 1000 * 1024.0)
    fake.hang(1)
    wait_for(lambda: device(sampler, 1).state == "not_responding")
    for gpu in (0, 2):  # their load falls, as in issue 19 (78 % -> 5 %)
        fake.devices[gpu].gpm_values["sm_active_pct"] = 5.0
        fake.devices[gpu].pcie_tx_kib = 10
    changed = time.time()
    for gpu in (0, 2):  # they follow it, while GPU 1 stays hung
        wait_for(lambda g=gpu: device(sampler, g).sm_active_pct == 5.0)  # type: ignore[misc]
        wait_for(lambda g=gpu: device(sampler, g).pcie_tx_bytes_per_s == 10 * 1024.0)  # type: ignore[misc]
        assert device(sampler, gpu).stale == ()
    assert device(sampler, 1).state == "not_responding"
    # No sample showed the old value as a live one once it was older than the stale limit:
    # each has the new value, or is flagged stale with its value null (0.5 s of room for a
    # reading whose worker was descheduled between reading and recording it).
    after = changed + STALE_S + 0.5
    wait_for(lambda: len(sampled_after(sampler, after)) >= 4)
    for d in sampled_after(sampler, after):
        assert d.sm_active_pct == 5.0 or (d.sm_active_pct is None and "gpm" in d.stale), d
        assert d.pcie_tx_bytes_per_s == 10240.0 or "pcie" in d.stale, d
    # The hung GPU's GPM and PCIe readings age and go stale: null, named, with their age.
    wait_for(lambda: {"fast", "gpm", "pcie"} <= set(device(sampler, 1).stale))
    hung = device(sampler, 1)
    assert hung.sm_active_pct is None
    assert hung.pcie_rx_bytes_per_s is None
    assert hung.gpm_age_s is not None
    assert hung.gpm_age_s > STALE_S
    assert hung.read_age_s is not None
    assert hung.read_age_s >= DEADLINE
    # One worker per reader and GPU, the hung GPU's three stuck in their calls.
    names = sampler.threads_alive()
    for prefix in ("jupyter-gpu-read", "jupyter-gpu-gpm-read", "jupyter-gpu-slow-read"):
        assert sorted(n for n in names if n.rsplit("-", 1)[0] == prefix) == [
            f"{prefix}-{i}" for i in range(3)
        ]
    assert fake.hung_calls == 3  # one per reader: the hung GPU is not asked again
    fake.release(1)
    wait_for(lambda: device(sampler, 1).state == "ok" and device(sampler, 1).stale == ())


def test_each_reading_says_its_age_and_a_stale_one_is_null(
    started: Callable[..., Sampler],
) -> None:
    fake = FakeNvml(devices=2)
    sampler = started(fake, **EVERY_READING_SLOW)
    wait_for(lambda: device(sampler, 0).sm_active_pct is not None)
    wait_for(lambda: device(sampler, 0).pcie_tx_bytes_per_s is not None)
    live = device(sampler, 0)
    for age in (live.read_age_s, live.gpm_age_s, live.pcie_age_s):
        assert age is not None
        assert age >= 0
    assert live.stale == ()
    # Only GPU 0's GPM and PCIe calls hang: its fast readings stay live, the rest go stale.
    fake.hang(0, calls={"nvmlGpmSampleGet", "nvmlDeviceGetPcieThroughput"})
    wait_for(lambda: set(device(sampler, 0).stale) == {"gpm", "pcie"})
    d = device(sampler, 0)
    assert d.state == "ok"
    assert d.util_pct == 50.0
    assert (d.sm_active_pct, d.tensor_active_pct, d.pcie_tx_bytes_per_s) == (None, None, None)
    assert d.gpm_age_s is not None
    assert d.gpm_age_s > STALE_S
    assert d.pcie_age_s is not None
    assert d.pcie_age_s > STALE_S
    json = d.to_dict()
    assert json["stale"] == ["gpm", "pcie"]
    assert json["sm_active_pct"] is None
    assert json["gpm_age_s"] == d.gpm_age_s
    other = device(sampler, 1)
    assert other.stale == ()
    assert other.sm_active_pct == 78.0
    fake.release(0)
    wait_for(lambda: device(sampler, 0).stale == ())
    assert device(sampler, 0).sm_active_pct == 78.0


@pytest.mark.parametrize(
    "calls",
    [None, {"nvmlGpmSampleGet"}],
    ids=["every-call", "only-gpm"],
)
def test_stop_keeps_to_its_timeout_with_a_hung_gpu(
    tmp_path: Path, calls: set[str] | None, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeNvml(devices=3)
    sampler = Sampler(
        SamplerOptions(interval_s=0.1, read_deadline_s=DEADLINE, **EVERY_READING_SLOW),
        backend_factory=lambda s: open_backend("nvml", nvml=fake, log=s.log),
        caches=(("inductor", str(tmp_path / "i")),),
    )
    sampler.start()
    try:
        wait_for(lambda: sampler.latest() is not None and device(sampler, 2).sm_active_pct == 78)
        fake.hang(1, calls=calls)
        wait_for(lambda: fake.hung_calls == (3 if calls is None else 1))  # fast, GPM, PCIe
        start = time.monotonic()
        sampler.stop(timeout=1)
        took = time.monotonic() - start
        assert took < 1.5
        # Every thread ended, but the workers still in GPU 1's hung calls.
        stuck = {"jupyter-gpu-read-1", "jupyter-gpu-gpm-read-1", "jupyter-gpu-slow-read-1"}
        assert set(sampler.threads_alive()) <= stuck
        assert "jupyter-gpu-gpm-read-1" in sampler.threads_alive()
        # A hung GPM read does not hold up the other GPUs: their GPM buffers are freed now;
        # nvmlShutdown waits for the hung call (it could block on it), and runs when it returns.
        others = [g for g in fake.gpm_samples if g.device in (0, 2)]
        assert others
        assert all(g.freed for g in others)
        assert fake.shutdowns == 0
        assert any("NVML left open" in r.getMessage() for r in caplog.records)
    finally:
        fake.release(1)
    wait_for(lambda: fake.shutdowns == 1)
    assert all(g.freed for g in fake.gpm_samples)
    wait_for(lambda: sampler.threads_alive() == [])


def test_the_simulated_hang_covers_gpm_and_pcie(tmp_path: Path) -> None:
    sampler = started_simulated("hang:1@0.5", **EVERY_READING_SLOW)
    try:

        def hung_and_stale() -> bool:
            d = device(sampler, 1)
            return d.state == "not_responding" and {"fast", "gpm", "pcie"} <= set(d.stale)

        wait_for(hung_and_stale)
        hung = device(sampler, 1)
        assert (hung.sm_active_pct, hung.pcie_rx_bytes_per_s) == (None, None)
        assert hung.gpm_age_s is not None
        assert hung.pcie_age_s is not None
        live = device(sampler, 0)
        assert live.stale == ()
        assert live.sm_active_pct is not None
        assert live.pcie_rx_bytes_per_s is not None
        backend = SimulatedBackend(2, faults=[parse_fault("hang:1@0-0.3")])
        start = time.monotonic()
        assert backend.read_group("gpm", 1) is not None
        assert backend.read_group("pcie", 1) is not None
        assert time.monotonic() - start >= 0.25  # each blocked until the fault ended
    finally:
        sampler.stop()
    assert sampler.threads_alive() == []
