"""Records, the ring buffer, the simulated backend, kernel attribution and read_once."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time

import pytest

from jupyter_gpu.readings import DeviceSample, HostSample, ProcessSample, Sample
from jupyter_gpu.sampling import Entry, History, KernelRef, freeze_kernel_map, read_once
from jupyter_gpu.sampling.attribution import ProcessAnnotator
from jupyter_gpu.simulated.backend import SIM_MEM_TOTAL_BYTES, SimulatedBackend

HOST = HostSample(cpu_pct=1.0, cpu_count=2.0, mem_used_bytes=1, mem_total_bytes=2)


def sample(seq: int, ts: float) -> Sample:
    return Sample(seq, ts, "none", False, "why", (), HOST)


def test_records_are_frozen_and_serialise_with_units_in_names() -> None:
    d = DeviceSample(0, "GPU-1", "X", power_w=None, unavailable={"power_w": "Not Supported"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.power_w = 3.0  # type: ignore[misc]  # assigning a frozen field is the point
    out = sample(1, 2.0).to_dict()
    assert set(out) == {
        "seq",
        "ts",
        "backend",
        "simulated",
        "reason",
        "devices",
        "host",
        "compile_cache",
        "nvml_wait_s",
    }
    assert out["nvml_wait_s"] is None
    assert out["compile_cache"] == {
        "size_bytes": 0,
        "file_count": 0,
        "scanned_ts": None,
        "dirs": [],
        "low_space": False,
    }
    dev = d.to_dict()
    assert dev["power_w"] is None
    assert dev["unavailable"] == {"power_w": "Not Supported"}
    assert all(k in dev for k in ("util_pct", "mem_used_bytes", "temperature_c", "sm_clock_mhz"))


def test_history_keeps_the_newest_and_filters_by_time() -> None:
    history = History(capacity=3)
    assert history.latest() is None
    assert history.since() == []
    for i in range(1, 6):
        history.append(Entry(sample(i, float(i)), str(i)))
    assert len(history) == 3
    assert [e.json for e in history.since()] == ["3", "4", "5"]
    assert [e.json for e in history.since(3.0)] == ["4", "5"]  # strictly after
    assert [e.json for e in history.since(3.5)] == ["4", "5"]
    assert history.since(5.0) == []
    assert [e.json for e in history.since(0.0)] == ["3", "4", "5"]
    latest = history.latest()
    assert latest is not None
    assert latest.json == "5"
    with pytest.raises(ValueError, match="at least 1"):
        History(0)


def test_simulated_devices_are_labelled_plausible_and_moving() -> None:
    t = [0.0]
    backend = SimulatedBackend(4, seed=1, clock=lambda: t[0])
    info = backend.info()
    assert info.simulated
    assert info.backend == "simulated"
    assert all(d.name is not None and d.name.startswith("Simulated") for d in info.devices)
    utils = []
    for _ in range(400):  # 400 s of simulated time
        t[0] += 1.0
        for d in backend.read():
            assert d.util_pct is not None
            assert 0.0 <= d.util_pct <= 100.0
            assert d.mem_used_bytes is not None
            assert 0 < d.mem_used_bytes <= SIM_MEM_TOTAL_BYTES
            assert d.power_w is not None
            assert 50.0 <= d.power_w <= 700.0
            assert d.temperature_c is not None
            assert 25.0 <= d.temperature_c <= 90.0
            utils.append(d.util_pct)
    assert min(utils) < 10.0
    assert max(utils) > 85.0  # idle and training phases both happen
    slow = backend.read_all("pcie")
    assert set(slow) == {0, 1, 2, 3}


def test_simulated_device_count_is_bounded() -> None:
    with pytest.raises(ValueError, match="1 to 16"):
        SimulatedBackend(17)


def test_simulated_backend_shows_given_pids_as_processes() -> None:
    backend = SimulatedBackend(2, pids=lambda: [101, 102, 103])
    d0, d1 = backend.read()
    assert [p.pid for p in d0.processes] == [101, 103]
    assert [p.pid for p in d1.processes] == [102]
    assert all(p.used_mem_bytes and p.used_mem_bytes > 0 for p in d0.processes)


def test_a_child_of_a_kernel_is_attributed_to_it() -> None:
    # This test process plays the kernel; a real child process plays a torchrun worker.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        annotator = ProcessAnnotator()
        annotator.kernel_map = freeze_kernel_map({os.getpid(): KernelRef("k-1", "nb/a.ipynb")})
        device = DeviceSample(
            0,
            "GPU-0",
            "X",
            processes=(
                ProcessSample(child.pid, None, 10),
                ProcessSample(os.getpid(), None, 20),
                ProcessSample(1, None, 30),  # init: not this server's
            ),
        )
        (annotated,) = annotator.annotate((device,))
        by_pid = {p.pid: p for p in annotated.processes}
        assert (by_pid[child.pid].kernel_id, by_pid[child.pid].notebook) == ("k-1", "nb/a.ipynb")
        assert by_pid[child.pid].name is not None
        assert by_pid[child.pid].name.startswith("python")
        assert by_pid[os.getpid()].kernel_id == "k-1"
        assert 1 not in by_pid  # another user's (root's init): summed, no pid
        other = by_pid[None]
        assert (other.scope, other.kernel_id, other.notebook) == ("other", None, None)
        assert other.used_mem_bytes == 30
    finally:
        child.kill()
        child.wait()


def test_a_process_that_is_gone_has_no_name_and_no_kernel() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    annotator = ProcessAnnotator()
    annotator.kernel_map = freeze_kernel_map({os.getpid(): KernelRef("k", None)})
    device = DeviceSample(0, None, None, processes=(ProcessSample(gone.pid, None, 1),))
    (annotated,) = annotator.annotate((device,))
    assert annotated.processes[0].name is None
    assert annotated.processes[0].kernel_id is None
    assert annotated.processes[0].scope == "unattributable"


def test_read_once_simulated_and_none() -> None:
    start = time.time()
    sim = read_once("simulated")
    assert (sim.seq, sim.backend, sim.simulated) == (0, "simulated", True)
    assert len(sim.devices) == 2
    assert sim.ts >= start
    assert sim.host.cpu_pct is not None  # measured over a short window
    assert sim.compile_cache.scanned_ts is None  # no scan unless asked
    off = read_once("none")
    assert (off.backend, off.devices) == ("none", ())
    assert off.reason is not None
    with pytest.raises(ValueError, match="backend must be one of"):
        read_once("cuda")


def test_read_once_can_scan_and_read_slow_metrics() -> None:
    s = read_once("simulated", scan_cache=True, slow=True)
    assert s.compile_cache.scanned_ts is not None
    assert [d.kind for d in s.compile_cache.dirs] == ["inductor", "triton"]
    assert all(d.pcie_rx_bytes_per_s is not None for d in s.devices)
