"""Fixtures of the sampling tests."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    """A list to put started processes in: each is killed and reaped after the test."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        p.kill()
        p.wait()
