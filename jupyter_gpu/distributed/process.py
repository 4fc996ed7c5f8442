"""Stopping torchrun and every process under it, so that no rank keeps GPU memory.

torchrun starts each rank in a session of its own (``start_new_session=True``), and a rank may
start processes of its own (DataLoader workers). When the notebook's stop button interrupts a
``%%torchrun`` cell, :func:`stop_tree` asks torchrun to stop its workers (SIGTERM, which its
agent handles by stopping them), waits a little, then kills whatever is left: every process
that was under torchrun when it began, and each rank's process group.

A rank is named by its pid and its start time, as it reported them when it began: a rank that
ended long before the stop may have left its pid to another process (another user's, when the
kernel runs as root), which must not be signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterable

import psutil


def die_with_parent(sig: int) -> None:
    """Ask Linux to send ``sig`` to this process when its parent exits (no-op elsewhere).

    torchrun's agent asks for ``SIGTERM`` when the kernel exits (it then stops its ranks); each
    rank for ``SIGKILL`` when the agent exits.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, sig)


RankId = tuple[int, float | None]
"""A rank's ``(pid, start time in Unix seconds)``; ``None``: an older rank that did not say."""


def _is(proc: psutil.Process, started_s: float | None) -> bool:
    """Whether ``proc`` is the process that started at ``started_s`` (``None``: cannot tell)."""
    return started_s is None or abs(proc.create_time() - started_s) < 0.005


def rank_process(rank: RankId) -> psutil.Process | None:
    """The rank's process if it still runs under its pid (not another process at that pid)."""
    pid, started_s = rank
    try:
        proc = psutil.Process(pid)
        return proc if _is(proc, started_s) else None
    except psutil.Error:
        return None


def _tree(root_pid: int, ranks: Iterable[RankId]) -> list[psutil.Process]:
    found: dict[int, psutil.Process] = {}
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(root_pid).children(recursive=True):
            found[child.pid] = child
    for rank in ranks:
        pid = rank[0]
        if pid in found:
            continue
        proc = rank_process(rank)
        if proc is None:
            continue
        with contextlib.suppress(psutil.Error):
            found[pid] = proc
            for child in proc.children(recursive=True):
                found.setdefault(child.pid, child)
    return list(found.values())


def stop_tree(
    proc: subprocess.Popen[bytes], ranks: Iterable[RankId] = (), *, grace_s: float = 10.0
) -> list[int]:
    """Stop ``proc`` (torchrun) and all its descendants; returns the pids that had to be killed.

    ``ranks`` are the ranks' pids and start times as they reported them: found even if
    torchrun already died and they were re-parented, and only while that process still holds
    the pid. Safe to call again (e.g. after a second interrupt).
    """
    ranks = list(ranks)
    rank_pids = [pid for pid, _ in ranks]
    procs = _tree(proc.pid, ranks)
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)  # torchrun's agent stops its workers
    _, alive = psutil.wait_procs([*procs, *_as_psutil(proc)], timeout=grace_s)
    killed = []
    for p in procs:  # a rank's own children (DataLoader workers) share its process group
        if p.pid in rank_pids and p.is_running():  # is_running also checks the start time
            with contextlib.suppress(OSError):
                os.killpg(p.pid, signal.SIGKILL)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
            killed.append(p.pid)
    psutil.wait_procs(alive, timeout=5)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    return killed


def _as_psutil(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    try:
        return [psutil.Process(proc.pid)]
    except psutil.Error:
        return []


def alive(pids: Iterable[int | RankId]) -> list[int]:
    """The pids of ``pids`` that still run (zombies count as gone).

    A ``(pid, start time)`` counts only while the process at that pid started then.
    """
    out = []
    for item in pids:
        pid, started_s = item if isinstance(item, tuple) else (item, None)
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if _is(proc, started_s) and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
    return out
