"""Stopping a ``%%torchrun`` run signals its ranks only: never a process that got a rank's pid.

A rank writes its pid and start time when it begins (``rank-N.json``). If it ended long before
the stop button is pressed, its pid may belong to another process by then (another user's, when
the kernel runs as root). Real processes play the parts; the reused pid is played by a process
whose start time differs from the one the "rank" reported.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from jupyter_gpu.distributed.launcher import _stop
from jupyter_gpu.distributed.output import RankOutput
from jupyter_gpu.distributed.process import alive, rank_process

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """A process of someone else's that holds the pid a rank once had."""
    proc = subprocess.Popen(SLEEP, start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def test_the_stop_leaves_a_process_that_took_a_rank_s_pid(
    tmp_path: Path, bystander: subprocess.Popen[bytes]
) -> None:
    started = psutil.Process(bystander.pid).create_time()
    # The rank that had this pid started 30 s before the process that holds it now.
    record = {"rank": 0, "pid": bystander.pid, "started_s": started - 30.0, "host": "h"}
    (tmp_path / "rank-0.json").write_text(json.dumps(record))
    torchrun = subprocess.Popen([sys.executable, "-c", "pass"])
    torchrun.wait()  # torchrun itself has ended too
    said: list[str] = []
    begun = time.monotonic()
    _stop(torchrun, tmp_path, RankOutput(tmp_path, 1, said.append, color=False), said.append)
    assert bystander.poll() is None  # not signalled
    assert time.monotonic() - begun < 5.0  # nor waited for (the grace is 10 s)
    assert "torchrun and its 1 rank(s) have stopped" in "".join(said)


def test_a_rank_is_its_pid_and_its_start_time(bystander: subprocess.Popen[bytes]) -> None:
    started = psutil.Process(bystander.pid).create_time()
    assert rank_process((bystander.pid, started)) is not None
    assert rank_process((bystander.pid, None)) is not None  # an older rank: by pid
    assert rank_process((bystander.pid, started - 30.0)) is None
    assert alive([(bystander.pid, started)]) == [bystander.pid]
    assert alive([(bystander.pid, started - 30.0)]) == []
    assert alive([bystander.pid]) == [bystander.pid]
