"""The quick start (``.ci/lab``) serves a git-ignored folder with its own copy of the tutorials.

``LAB_DRY_RUN=1`` makes ``.ci/lab`` copy the tutorials for real but only print the setup and
server commands, so this runs without setting up or starting anything. What it checks: the
folder JupyterLab would serve is ignored by git and holds a copy of every tutorial, and the
launcher's *GPU tutorials* item (which copies into ``gpu-tutorials/`` under the served folder)
lands in that same copy, so nothing a user runs or saves there dirties the checkout.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from jupyter_gpu.server.notebook_copy import checked_folder
from jupyter_gpu.tutorials.copy_notebooks import shipped_files

ROOT = Path(__file__).resolve().parents[2]
# .ci/lab copies into the checkout's lab-work/ (printed): once, on one pytest-xdist worker.
pytestmark = pytest.mark.xdist_group("quick_start")


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def printed() -> list[list[str]]:
    """The commands ``.ci/lab`` would run, each as its arguments."""
    if not (ROOT / ".venv" / "bin" / "jupyter").exists():
        pytest.skip(".ci/lab runs .venv's jupyter: set up with .ci/setup first")
    if _git("rev-parse", "--is-inside-work-tree").returncode != 0:
        pytest.skip("not a git checkout")
    env = {**os.environ, "LAB_DRY_RUN": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        ["bash", str(ROOT / ".ci" / "lab"), "--JupyterGpu.backend=simulated"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    commands: list[list[str]] = []
    current: list[str] | None = None
    for line in out.splitlines():  # the copy's own report is printed between the commands
        if current is None and line in ("bash", ".venv/bin/jupyter"):
            current = []
        if current is not None:
            if line == "--":
                commands.append(current)
                current = None
            else:
                current.append(line)
    return commands


def _served(printed: list[list[str]]) -> Path:
    (lab,) = [c for c in printed if c[:2] == [".venv/bin/jupyter", "lab"]]
    (root,) = [a.split("=", 1)[1] for a in lab if a.startswith("--ServerApp.root_dir=")]
    assert "--JupyterGpu.backend=simulated" in lab  # the user's arguments reach jupyter lab
    return Path(root)


def test_the_quick_start_sets_up_then_serves_a_folder_git_ignores(printed: list[list[str]]) -> None:
    assert printed[0] == ["bash", ".ci/setup"]
    served = _served(printed)
    assert served.is_relative_to(ROOT)
    assert not served.is_relative_to(ROOT / "notebooks")  # not the tracked tutorials
    assert _git("check-ignore", "-q", str(served / "any-new-notebook.ipynb")).returncode == 0


def test_the_served_folder_holds_a_copy_of_every_tutorial_and_git_sees_none(
    printed: list[list[str]],
) -> None:
    copies = _served(printed) / checked_folder(None)  # where the launcher's item copies too
    for relative in shipped_files(ROOT / "notebooks"):
        copy = copies / relative
        assert copy.is_file(), relative
        assert _git("check-ignore", "-q", str(copy)).returncode == 0, relative
    status = _git("status", "--porcelain", "--untracked-files=all", "--", str(copies)).stdout
    assert status == ""


def test_the_launcher_item_copies_into_the_folder_the_quick_start_fills() -> None:
    source = (ROOT / "labextension" / "src" / "tutorialsApi.ts").read_text()
    match = re.search(r"TUTORIALS_FOLDER = '([^']+)'", source)
    assert match is not None
    assert match.group(1) == checked_folder(None) == "gpu-tutorials"
    assert "gpu-tutorials" in (ROOT / ".ci" / "lab").read_text()
