"""Stopping torchrun and every process under it, so that no rank keeps GPU memory.

torchrun starts each rank in a session of its own (``start_new_session=True``), and a rank may
start processes of its own (DataLoader workers). When the notebook's stop button interrupts a
``%%torchrun`` cell, :func:`stop_tree` asks torchrun to stop its workers (SIGTERM, which its
agent handles by stopping them), waits a little, then kills whatever is left: every process
that was under torchrun when it began, and each rank's process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterable

import psutil


def _tree(root_pid: int, extra_pids: Iterable[int]) -> list[psutil.Process]:
    found: dict[int, psutil.Process] = {}
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(root_pid).children(recursive=True):
            found[child.pid] = child
    for pid in extra_pids:
        if pid in found:
            continue
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            found[pid] = proc
            for child in proc.children(recursive=True):
                found.setdefault(child.pid, child)
    return list(found.values())


def stop_tree(
    proc: subprocess.Popen[bytes], rank_pids: Iterable[int] = (), *, grace_s: float = 10.0
) -> list[int]:
    """Stop ``proc`` (torchrun) and all its descendants; returns the pids that had to be killed.

    ``rank_pids`` are the ranks' pids as they reported them: found even if torchrun already died
    and they were re-parented. Safe to call again (e.g. after a second interrupt).
    """
    rank_pids = list(rank_pids)
    procs = _tree(proc.pid, rank_pids)
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


def alive(pids: Iterable[int]) -> list[int]:
    """The pids of ``pids`` that still run (zombies count as gone)."""
    out = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
    return out
