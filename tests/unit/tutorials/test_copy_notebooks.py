"""`jupyter gpu-tutorials DIR` copies the notebooks, never over the user's edits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomllib

from jupyter_gpu.tutorials.copy_notebooks import (
    copy_tutorials,
    main,
    shipped_files,
    shipped_notebooks_dir,
)

ROOT = Path(__file__).resolve().parents[3]


def test_every_notebook_and_the_readme_are_shipped() -> None:
    files = shipped_files()
    on_disk = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert [f for f in files if f.endswith(".ipynb") and "/" not in f] == on_disk
    assert "README.md" in files
    assert shipped_notebooks_dir().is_dir()


def test_copy_then_nothing_to_do(tmp_path: Path) -> None:
    first = copy_tutorials(tmp_path / "mine")
    assert first.copied == shipped_files()
    assert not first.kept
    again = copy_tutorials(tmp_path / "mine")
    assert again.copied == []
    assert again.unchanged == shipped_files()


def test_an_edited_notebook_is_kept_and_a_deleted_one_comes_back(tmp_path: Path) -> None:
    copy_tutorials(tmp_path)
    edited = tmp_path / "00-start-here.ipynb"
    nb = json.loads(edited.read_text())
    nb["cells"][0]["source"] = ["# my notes\n"]
    edited.write_text(json.dumps(nb))
    mine = edited.read_bytes()
    (tmp_path / "01-torch-compile.ipynb").unlink()

    report = copy_tutorials(tmp_path)

    assert report.kept == ["00-start-here.ipynb"]
    assert report.copied == ["01-torch-compile.ipynb"]
    assert edited.read_bytes() == mine, "an edited notebook must never be overwritten"
    assert (
        "kept your edited copy of 00-start-here.ipynb (nothing is overwritten: rename or "
        "delete it and" in report.describe()
    )
    (tmp_path / "01-torch-compile.ipynb").write_text("{}")
    two = copy_tutorials(tmp_path).describe()
    assert "kept your edited copies of 00-start-here.ipynb, 01-torch-compile.ipynb" in two
    assert "rename or delete one and" in two


def test_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "t")]) == 0
    assert "copied" in capsys.readouterr().out
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main([str(blocker)]) == 1
    assert "not a folder" in capsys.readouterr().err


def test_the_wheel_ships_the_notebooks_and_the_command() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    hatch = project["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert hatch["force-include"]["notebooks"] == "jupyter_gpu/tutorials/notebooks"
    script = project["project"]["scripts"]["jupyter-gpu-tutorials"]
    assert script == "jupyter_gpu.tutorials.copy_notebooks:main"
