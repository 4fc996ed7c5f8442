"""One simulated world for a server and its kernels: the same jobs, kernels and interconnect.

A kernel's ``%gpu`` opens a simulated backend of its own. It agrees with the server's because it
starts its timeline where the server's is (``JUPYTER_GPU_SIMULATED_EPOCH``) and lists the same
kernels as GPU processes (``kernel_pids_of_server``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from IPython.utils.capture import capture_output

from jupyter_gpu.backends import open_backend
from jupyter_gpu.backends.reasons import SIMULATED_EPOCH_ENV, simulated_epoch_from_env
from jupyter_gpu.magics.gpu.report import show_topology
from jupyter_gpu.sampling.attribution import kernel_pids_of_server
from jupyter_gpu.simulated.backend import SimulatedBackend
from tests.helpers import wait_until_execd


@pytest.mark.parametrize("elapsed_s", [0.0, 7.5, 40.0, 130.0, 1000.0])
def test_a_backend_opened_later_shows_the_jobs_where_the_first_one_is(elapsed_s: float) -> None:
    first_clock = [100.0]
    first = SimulatedBackend(2, clock=lambda: first_clock[0])
    first_clock[0] += elapsed_s
    late = SimulatedBackend(2, clock=lambda: 5.0, elapsed_s=elapsed_s)  # opened just now
    for a, b in zip(first.read(), late.read(), strict=True):
        # Memory follows the job's phase alone; utilization carries a little noise.
        assert a.mem_used_bytes == b.mem_used_bytes
        assert a.util_pct is not None
        assert b.util_pct is not None
        assert abs(a.util_pct - b.util_pct) < 15.0


def test_a_late_backends_first_temperature_is_settled_like_the_running_ones() -> None:
    clock = [0.0]
    running = SimulatedBackend(2, clock=lambda: clock[0])
    for _ in range(300):  # 300 s, read each second as a sampler does
        clock[0] += 1.0
        temps = [d.temperature_c for d in running.read()]
    late = SimulatedBackend(2, clock=lambda: 0.0, elapsed_s=300.0)
    for before, now in zip(temps, (d.temperature_c for d in late.read()), strict=True):
        assert before is not None
        assert now is not None
        assert abs(before - now) < 5.0  # not the 35 °C a fresh backend starts at


def test_the_epoch_from_the_environment() -> None:
    now = time.time()
    assert simulated_epoch_from_env({SIMULATED_EPOCH_ENV: repr(now - 60)}) == now - 60
    for bad in ("", "soon", "nan", "inf", "-5", repr(now + 3600)):
        assert simulated_epoch_from_env({SIMULATED_EPOCH_ENV: bad}) is None, bad
    assert simulated_epoch_from_env({}) is None


def test_open_backend_starts_the_jobs_at_the_epoch() -> None:
    epoch = time.time() - 20.0
    shared = open_backend("simulated", simulated_epoch=epoch)
    assert isinstance(shared, SimulatedBackend)
    own = SimulatedBackend(2, elapsed_s=20.0)  # opened a moment later: a memory ramp moves
    fresh = SimulatedBackend(2)
    for a, b, c in zip(shared.read(), own.read(), fresh.read(), strict=True):
        assert a.mem_used_bytes is not None
        assert b.mem_used_bytes is not None
        assert c.mem_used_bytes is not None
        assert abs(a.mem_used_bytes - b.mem_used_bytes) < 2**30
    assert [d.mem_used_bytes for d in own.read()] != [d.mem_used_bytes for d in fresh.read()]


def test_a_servers_kernels_are_its_children_that_name_it(
    sleepers: list[subprocess.Popen[bytes]],
) -> None:
    # This test process plays the server: two "kernels" get JPY_PARENT_PID as jupyter_client's
    # launcher sets it; a third child (a terminal, say) does not, and one names another parent.
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    me = str(os.getpid())
    base = {k: v for k, v in os.environ.items() if k != "JPY_PARENT_PID"}
    for parent in (me, me, None, "1"):
        env = base if parent is None else {**base, "JPY_PARENT_PID": parent}
        sleepers.append(subprocess.Popen(sleeper, env=env))
    wait_until_execd(sleepers)  # its environment is readable from then on
    kernels = kernel_pids_of_server(os.getpid())
    assert kernels == sorted(c.pid for c in sleepers[:2])
    assert kernel_pids_of_server(sleepers[2].pid) == []  # no kernels of its own
    assert kernel_pids_of_server(2**22 + 1) == []  # no such process


def test_the_simulated_topology_is_an_nvswitch_board_and_says_simulated() -> None:
    topology = SimulatedBackend(3).topology()  # the board its GPUs are on
    assert topology.simulated
    assert [g.nvlinks for g in topology.gpus] == [18, 18, 18]
    assert {(p.a, p.b) for p in topology.pairs} == {(0, 1), (0, 2), (1, 2)}
    assert all(p.path == "NV18" and p.p2p for p in topology.pairs)
    from IPython.core.interactiveshell import InteractiveShell

    InteractiveShell.instance()  # displays go through a shell's publisher
    with capture_output() as captured:
        show_topology(topology)
    text = captured.outputs[0].data["text/plain"]
    assert "GPU interconnect (simulated" in text
    assert "P2P reads possible (simulated)" in text
    link_lines = [line for line in text.splitlines() if line.startswith("GPU0 Simulated")]
    assert link_lines
    assert all(line.endswith("(simulated)") for line in link_lines)
    assert "Simulated: " in text
