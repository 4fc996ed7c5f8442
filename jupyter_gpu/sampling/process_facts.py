"""What this server can see of a process, and who a process *is*: its pid and its start time.

A pid alone does not name a process: once one ends, the kernel may give its pid to the next
process started, another user's included (Linux hands pids out in turn, so a busy machine comes
round again quickly). Everything that keeps a pid for later (the annotator's cache of names and
parents, the kernel map) keeps its start time with it and trusts what it kept only while the
process at that pid still has that start time. Reading a start time is one read of
``/proc/<pid>/stat`` (psutil's ``create_time``).
"""

from __future__ import annotations

from dataclasses import dataclass

import psutil

ProcessId = tuple[int, float | None]
"""``(pid, start time in Unix seconds)``; the start time is ``None`` where it cannot be read."""


def start_time_s(pid: int) -> float | None:
    """When the process now at ``pid`` started (Unix seconds, ``ps -o lstart``); ``None``: none.

    ``None`` also for a pid that is not visible here (ended, another pid namespace) or not a
    real one (``<= 0``, what a driver may report for a process outside the namespace).
    """
    if pid <= 0:
        return None
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def same_process(kept: float | None, now: float | None) -> bool:
    """Whether two start times of one pid are one process's.

    A start time that could not be read when it was kept (``kept`` ``None``) says nothing: the
    pid alone decides, as before identity was kept. One that cannot be read now, or differs by
    more than a clock tick's rounding, is another process (or none).
    """
    if kept is None:
        return True
    return now is not None and abs(kept - now) < 0.005


@dataclass(frozen=True, slots=True)
class ProcessFacts:
    """What psutil says about one process: its identity, name, unix user and parents.

    Attributes:
        pid: the pid asked about.
        started_s: its start time (Unix seconds); ``None`` when it is not visible.
        name: its name (``None``: not readable, e.g. ``hidepid``).
        uid: its real unix user (``None``: unknown).
        ancestors: its own identity first, then each parent's up to init, as
            ``(pid, start time)``: a parent is matched by both.
        visible: the pid is a process this server can see.
    """

    pid: int
    started_s: float | None
    name: str | None
    uid: int | None
    ancestors: tuple[ProcessId, ...]
    visible: bool


def read_process(pid: int) -> ProcessFacts:
    """``pid``'s facts now (psutil); a pid that is not visible here is ``visible=False``."""
    try:
        if pid <= 0:  # what a driver may report for a process outside the namespace
            raise psutil.NoSuchProcess(pid)
        proc = psutil.Process(pid)  # reads the start time: the identity of what follows
        started: float | None = float(proc.create_time())
    except psutil.Error:  # gone, or in another pid namespace
        return ProcessFacts(pid, None, None, None, ((pid, None),), False)
    name: str | None = None
    uid: int | None = None
    parents: tuple[ProcessId, ...] = ()
    try:
        with proc.oneshot():
            name = proc.name()
            uid = proc.uids().real
            parents = tuple((p.pid, _started(p)) for p in proc.parents())
    except psutil.Error:  # visible but not readable (hidepid, ended meanwhile)
        pass
    return ProcessFacts(pid, started, name, uid, ((pid, started), *parents), True)


def _started(proc: psutil.Process) -> float | None:
    try:
        return float(proc.create_time())  # psutil read it when it made the object
    except psutil.Error:
        return None
