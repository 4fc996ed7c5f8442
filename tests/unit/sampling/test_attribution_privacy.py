"""Whose GPU processes a server shows in full, which it hides as "other", which it cannot place.

Real processes play the parts: this test process (or a child) is "the server", a sibling outside
its tree is another user's, a pid that has ended is one NVML lists but nobody here can see.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jupyter_gpu.readings import DeviceSample, ProcessSample
from jupyter_gpu.sampling import KernelRef, ProcessAnnotator, freeze_kernel_map
from jupyter_gpu.sampling.attribution import in_own_pid_namespace, unattributable_reason

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


def spawn(
    procs: list[subprocess.Popen[bytes]], argv: list[str] = SLEEP, user: int | None = None
) -> int:
    proc = subprocess.Popen(argv, user=user)
    procs.append(proc)
    return int(proc.pid)


def ended_pid() -> int:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    return gone.pid


def device(*procs: tuple[int, int | None]) -> DeviceSample:
    return DeviceSample(
        0, "GPU-0", "X", processes=tuple(ProcessSample(pid, None, mem) for pid, mem in procs)
    )


def test_other_users_processes_are_one_row_without_pid_or_name(
    sleepers: list[subprocess.Popen[bytes]],
) -> None:
    server = spawn(sleepers)  # "the server": the tree under it is this user's
    other_a, other_b = spawn(sleepers), spawn(sleepers)  # siblings: not under the server
    annotator = ProcessAnnotator(root_pid=server, uid=0)
    annotator.kernel_map = freeze_kernel_map({server: KernelRef("k-1", "mine.ipynb")})
    (d,) = annotator.annotate((device((server, 100), (other_a, 20), (other_b, None)),))
    mine, others = d.processes
    assert (mine.pid, mine.scope, mine.notebook) == (server, "server", "mine.ipynb")
    assert mine.name is not None
    assert (others.scope, others.pid, others.name, others.kernel_id, others.notebook) == (
        "other",
        None,
        None,
        None,
        None,
    )
    assert (others.used_mem_bytes, others.process_count, others.reason) == (20, 2, None)
    # Nothing about them reaches the JSON either.
    assert str(other_a) not in str(d.to_dict()["processes"][1])


def test_the_admin_option_lists_other_users_processes(
    sleepers: list[subprocess.Popen[bytes]],
) -> None:
    other = spawn(sleepers)
    annotator = ProcessAnnotator(root_pid=ended_pid(), uid=0, show_other_processes=True)
    (d,) = annotator.annotate(
        (
            device(
                (other, 20),
            ),
        )
    )
    (row,) = d.processes
    assert (row.pid, row.scope, row.process_count) == (other, "other", 1)
    assert row.name is not None
    assert row.name.startswith("python")


def test_a_child_of_the_server_is_its_own_even_without_a_kernel() -> None:
    # A terminal's script: under the server (this test process), no kernel.
    child = subprocess.Popen(SLEEP)
    try:
        (d,) = ProcessAnnotator(uid=0).annotate((device((child.pid, 5)),))
        assert (d.processes[0].pid, d.processes[0].scope) == (child.pid, "server")
        assert d.processes[0].kernel_id is None
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="starts a process as another unix user")
def test_same_unix_user_is_own_unless_root_or_switched_off(
    sleepers: list[subprocess.Popen[bytes]],
) -> None:
    nobody = 65534
    # sleep, not Python: this machine's Python lives in root's home, which nobody may enter.
    theirs = spawn(sleepers, argv=["sleep", "60"], user=nobody)
    outside = ended_pid()
    (d,) = ProcessAnnotator(root_pid=outside, uid=nobody).annotate((device((theirs, 1)),))
    assert (d.processes[0].pid, d.processes[0].scope) == (theirs, "server")
    off = ProcessAnnotator(root_pid=outside, uid=nobody, own_uid_processes=False)
    (d,) = off.annotate((device((theirs, 1)),))
    assert (d.processes[0].pid, d.processes[0].scope) == (None, "other")
    # Root's uid is every root service's: it says nothing about whose a process is.
    root_owned = spawn(sleepers)
    (d,) = ProcessAnnotator(root_pid=outside, uid=0).annotate((device((root_owned, 1)),))
    assert d.processes[0].scope == "other"


@pytest.mark.parametrize("in_namespace", [True, False])
def test_pids_matching_nothing_visible_are_one_row_that_says_why(in_namespace: bool) -> None:
    gone_a, gone_b = ended_pid(), ended_pid()
    annotator = ProcessAnnotator(in_namespace=in_namespace)
    (d,) = annotator.annotate((device((gone_a, 300), (gone_b, 200)),))
    (row,) = d.processes
    assert (row.scope, row.pid, row.name, row.kernel_id) == ("unattributable", None, None, None)
    assert (row.used_mem_bytes, row.process_count) == (500, 2)
    assert row.reason is not None
    assert row.reason.startswith("Not attributable")
    assert "2 processes" in row.reason
    assert ("container" in row.reason) is in_namespace
    assert row.to_dict()["reason"] == row.reason


def test_the_reason_names_the_way_out() -> None:
    text = unattributable_reason(1, True)
    assert "1 process " in text
    assert "hostPID" in text
    assert "R580" in text


def test_pid_namespace_detection(tmp_path: Path) -> None:
    assert in_own_pid_namespace(str(tmp_path)) is None  # no /proc there
    (tmp_path / "self" / "ns").mkdir(parents=True)
    (tmp_path / "self" / "ns" / "pid").write_text("")
    assert in_own_pid_namespace(str(tmp_path)) is True  # any inode but the host's
    assert in_own_pid_namespace() in (True, False)  # this machine: one or the other


def test_unknown_memory_stays_unknown_in_a_summary() -> None:
    (d,) = ProcessAnnotator(in_namespace=False).annotate((device((ended_pid(), None)),))
    assert d.processes[0].used_mem_bytes is None
    assert d.processes[0].process_count == 1


def test_in_a_kernel_this_server_is_the_one_that_started_it(
    monkeypatch: pytest.MonkeyPatch, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    # A kernel's own reading (%gpu): a sibling kernel of the same server is the user's own.
    sibling = spawn(sleepers)
    monkeypatch.setenv("JPY_PARENT_PID", str(os.getpid()))
    annotator = ProcessAnnotator(uid=0)
    assert annotator.root_pid == os.getpid()
    (d,) = annotator.annotate((device((sibling, 1)),))
    assert (d.processes[0].pid, d.processes[0].scope) == (sibling, "server")
    monkeypatch.setenv("JPY_PARENT_PID", "not-a-pid")
    assert ProcessAnnotator(uid=0).root_pid == os.getpid()
