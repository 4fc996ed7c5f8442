"""The kernel map names each kernel's process by pid and by the start time it was first seen with.

``build_kernel_map`` reads three things of jupyter_server's kernel managers (the kernel ids, each
kernel's provisioner pid, its activity); the managers here are plain objects with those
attributes, and the kernels are real processes.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from jupyter_gpu.sampling.process_facts import ProcessId, start_time_s
from jupyter_gpu.server import kernels
from jupyter_gpu.server.kernels import build_kernel_map


class Kernels:
    """The part of a ``MultiKernelManager`` the map reads: ids, and a manager per kernel."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids

    def list_kernel_ids(self) -> list[str]:
        return list(self.pids)

    def get_kernel(self, kernel_id: str) -> SimpleNamespace:
        return SimpleNamespace(provisioner=SimpleNamespace(pid=self.pids[kernel_id]))


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def build(manager: Kernels, seen: dict[str, ProcessId]) -> dict[int, object]:
    log = logging.getLogger("test")
    return dict(asyncio.run(build_kernel_map(manager, None, log, seen)))


def test_a_kernel_keeps_the_start_time_its_pid_had_when_first_seen(
    sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, ProcessId] = {}
    manager = Kernels({"k-1": sleeper.pid})
    first = build(manager, seen)
    started = start_time_s(sleeper.pid)
    assert started is not None
    assert first[sleeper.pid].started_s == started  # type: ignore[attr-defined]
    # The kernel ends and its pid goes to a process that started later, before the manager
    # notices: the map still says which process the kernel was.
    monkeypatch.setattr(kernels, "start_time_s", lambda pid: started + 30.0)
    again = build(manager, seen)
    assert again[sleeper.pid].started_s == started  # type: ignore[attr-defined]
    # A restarted kernel (a new pid) is read afresh; a kernel that is gone is forgotten.
    manager.pids["k-1"] = sleeper.pid + 1
    restarted = build(manager, seen)
    assert restarted[sleeper.pid + 1].started_s == started + 30.0  # type: ignore[attr-defined]
    manager.pids.clear()
    assert build(manager, seen) == {}
    assert seen == {}
