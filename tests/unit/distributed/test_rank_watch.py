"""A rank ends with the kernel that ran its cell, whatever torchrun is doing meanwhile."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_gpu.distributed.process import alive
from tests.helpers import ROOT, wait_for

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the watch is a Linux pidfd"
)

# A stand-in rank: watches the kernel, starts a child of its own (a DataLoader worker would be
# one), writes both pids, then sleeps as a rank in a long cell does.
RANK = """\
import os, subprocess, sys, time
from jupyter_gpu.distributed.rank_main import die_with_kernel
die_with_kernel(int(sys.argv[1]))
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[2], "w").write(f"{os.getpid()} {child.pid}")
time.sleep(600)
"""


def start_rank(kernel_pid: int, pids: Path) -> subprocess.Popen[bytes]:
    # torchrun starts each rank in a session of its own, as here.
    return subprocess.Popen(
        [sys.executable, "-c", RANK, str(kernel_pid), str(pids)],
        cwd=ROOT,
        start_new_session=True,
    )


def started(pids: Path) -> bool:
    return pids.exists() and " " in pids.read_text()


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """The test's processes; whatever is left of them (and the rank's child) is killed after."""
    started_here: list[subprocess.Popen[bytes]] = []
    yield started_here
    for proc in started_here:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    pids = tmp_path / "pids"
    if started(pids):
        for pid in alive([int(pids.read_text().split()[1])]):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def start_kernel_and_rank(
    pids: Path, procs: list[subprocess.Popen[bytes]]
) -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]]:
    """A stand-in kernel (a sleeping process) and a rank that watches it, once it runs."""
    kernel = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    rank = start_rank(kernel.pid, pids)
    procs += [kernel, rank]
    wait_for(lambda: started(pids), "the rank did not start", timeout_s=60, process=rank)
    return kernel, rank


def test_a_rank_and_its_children_end_when_the_kernel_ends(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    pids = tmp_path / "pids"
    kernel, rank = start_kernel_and_rank(pids, procs)
    child = int(pids.read_text().split()[1])
    kernel.kill()
    kernel.wait()
    rank.wait(timeout=10)
    assert rank.returncode == -signal.SIGKILL
    wait_for(lambda: not alive([child]), "the rank's child still runs", timeout_s=10)


def test_a_rank_keeps_running_while_its_kernel_does(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    _, rank = start_kernel_and_rank(tmp_path / "pids", procs)
    time.sleep(1.0)
    assert rank.poll() is None


def test_a_rank_whose_kernel_is_already_gone_ends_at_once(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    kernel = subprocess.Popen([sys.executable, "-c", "pass"])
    kernel.wait()  # reaped: the pid names no process now
    rank = start_rank(kernel.pid, tmp_path / "pids")
    procs.append(rank)
    rank.wait(timeout=30)
    assert rank.returncode == -signal.SIGKILL
    assert not (tmp_path / "pids").exists()
