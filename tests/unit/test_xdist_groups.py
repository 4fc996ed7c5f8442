"""``.ci/test`` runs the tests on pytest-xdist workers with ``--dist loadgroup``: the tests of
one ``xdist_group`` run on one worker, in their order (tests/xdist_groups.py names the groups where
pytest-xdist's own naming has no effect, pytest-dev/pytest-xdist#1386)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xdist")

ROOT = Path(__file__).resolve().parents[2]

TESTS = """
import os
import pytest

def record(name):
    with open(os.environ["GROUPS_LOG"], "a") as log:
        log.write(f"{name} {os.environ['PYTEST_XDIST_WORKER']}\\n")

@pytest.mark.xdist_group("first")
@pytest.mark.parametrize("i", range(4))
def test_first(i):
    record(f"first-{i}")

@pytest.mark.parametrize("i", range(4))
def test_loose(i):
    record(f"loose-{i}")

@pytest.mark.xdist_group("second")
@pytest.mark.parametrize("i", range(4))
def test_second(i):
    record(f"second-{i}")
"""


def test_a_group_runs_on_one_worker_in_order(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(TESTS)
    log = tmp_path / "ran.txt"
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    # Only the plugins the run needs: loading every installed one (pytest-jupyter, schemathesis,
    # hypothesis, ...) in the three processes took 9.8 s of CPU; these two, 1.2 s.
    env = {**os.environ, "GROUPS_LOG": str(log), "PYTHONPATH": path,
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # fmt: skip
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-p", "tests.xdist_groups",
         "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", "-q", "test_grouped.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    runs = [line.split() for line in log.read_text().splitlines()]
    assert len(runs) == 12
    for group in ("first", "second"):
        names = [name for name, _ in runs if name.startswith(group)]
        assert names == [f"{group}-{i}" for i in range(4)]  # in their order
        workers = {worker for name, worker in runs if name.startswith(group)}
        assert len(workers) == 1, (group, runs)  # on one worker
