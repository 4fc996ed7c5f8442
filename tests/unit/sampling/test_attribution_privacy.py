"""Whose GPU processes a server shows in full, which it hides as "other", which it cannot place.

Real processes play the parts: this test process (or a child) is "the server", a sibling outside
its tree is another user's, a pid that has ended is one NVML lists but nobody here can see. A pid
given to another process cannot be made on demand: those tests hand the annotator the facts a
reused pid would show (same pid, another start time, another owner).
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
from jupyter_gpu.sampling.process_facts import (
    ProcessFacts,
    read_process,
    same_process,
    start_time_s,
)

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


# -- pid reuse: a process is its pid and its start time

ROOT_PID, ROOT_STARTED = 7, 50.0
OURS = ProcessFacts(4242, 100.0, "python3", 1000, ((4242, 100.0), (ROOT_PID, ROOT_STARTED)), True)
"""A kernel's process of this server (uid 1000), under the server."""
THEIRS = ProcessFacts(4242, 200.0, "miner", 2000, ((4242, 200.0), (1, 1.0)), True)
"""Another user's process that was given the same pid after ours ended."""
OUR_KERNEL = {4242: KernelRef("k-1", "mine.ipynb", started_s=100.0)}
"""The kernel map's entry for ``OURS``: kernel k-1 at pid 4242, started when ``OURS`` did."""


class Machine:
    """The annotator's view of processes (its two inputs), which a test changes at will."""

    def __init__(self, *facts: ProcessFacts) -> None:
        self.now = 0.0
        self.facts = {f.pid: f for f in facts}
        self.facts[ROOT_PID] = ProcessFacts(ROOT_PID, ROOT_STARTED, "jupyter", 1000, (), True)

    def annotator(self, kernels: dict[int, KernelRef] | None = None) -> ProcessAnnotator:
        """The annotator over this machine, with ``kernels`` (pid to kernel) as its kernel map."""
        made = ProcessAnnotator(
            clock=lambda: self.now,
            root_pid=ROOT_PID,
            uid=1000,
            in_namespace=False,
            start_time=lambda pid: self.facts[pid].started_s,
            describe=lambda pid: self.facts[pid],
        )
        if kernels is not None:
            made.kernel_map = freeze_kernel_map(kernels)
        return made


def test_a_reused_pid_is_not_shown_as_the_process_that_had_it() -> None:
    machine = Machine(OURS)
    annotator = machine.annotator(OUR_KERNEL)
    (d,) = annotator.annotate((device((4242, 100)),))
    (row,) = d.processes
    assert (row.pid, row.name, row.scope, row.kernel_id) == (4242, "python3", "server", "k-1")
    # The kernel ends; one second later (well within the 10 s cache) another user's process
    # has its pid and holds GPU memory.
    machine.facts[4242] = THEIRS
    machine.now += 1.0
    (d,) = annotator.annotate((device((4242, 7)),))
    (row,) = d.processes
    assert (row.scope, row.pid, row.name, row.kernel_id, row.notebook) == (
        "other",
        None,
        None,
        None,
        None,
    )
    assert annotator.kernel_pids() == []  # nor is the map's pid still that kernel's


def test_a_kernel_pid_taken_by_another_process_is_not_that_kernel() -> None:
    # The map still names the kernel at 4242 (it is rebuilt every few seconds), but the process
    # there now started later: not the kernel, and not under this server.
    machine = Machine(THEIRS)
    annotator = machine.annotator(OUR_KERNEL)
    (d,) = annotator.annotate((device((4242, 7)),))
    assert (d.processes[0].scope, d.processes[0].kernel_id) == ("other", None)
    # A map without start times (an older caller) matches by pid, as before.
    annotator.kernel_map = freeze_kernel_map({4242: KernelRef("k-1", "mine.ipynb")})
    machine.now += 20.0
    (d,) = annotator.annotate((device((4242, 7)),))
    assert d.processes[0].kernel_id == "k-1"


def test_a_server_pid_taken_by_another_process_is_not_the_server() -> None:
    # The process's parent is at the server's pid, but started after it: not this server.
    stranger = ProcessFacts(4300, 300.0, "x", 2000, ((4300, 300.0), (ROOT_PID, 250.0)), True)
    machine = Machine(stranger)
    (d,) = machine.annotator().annotate((device((4300, 1)),))
    assert d.processes[0].scope == "other"


def test_process_facts_name_a_real_process_by_pid_and_start_time(
    sleepers: list[subprocess.Popen[bytes]],
) -> None:
    pid = spawn(sleepers)
    facts = read_process(pid)
    assert facts.visible
    assert facts.started_s == start_time_s(pid)
    assert facts.ancestors[0] == (pid, facts.started_s)
    assert facts.ancestors[1] == (os.getpid(), start_time_s(os.getpid()))
    gone = ended_pid()
    assert start_time_s(gone) is None
    assert read_process(gone).visible is False
    assert same_process(None, 5.0)  # kept without a start time: the pid decides
    assert not same_process(5.0, None)
    assert not same_process(5.0, 6.0)
