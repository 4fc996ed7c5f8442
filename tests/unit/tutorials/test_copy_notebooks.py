"""`jupyter gpu-tutorials DIR` copies the notebooks, never over the user's edits."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
import tomllib

from jupyter_gpu.new_files import open_folder
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


def test_a_planted_partial_link_is_never_written_through(tmp_path: Path) -> None:
    # Another user who can write in the folder plants the name the copy once wrote first.
    victim = tmp_path / "victims-file"
    victim.write_bytes(b"the user's own file")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "00-start-here.ipynb.partial").symlink_to(victim)
    report = copy_tutorials(shared)
    assert victim.read_bytes() == b"the user's own file"
    assert report.copied == shipped_files()
    assert report.skipped == []
    copied = shared / "00-start-here.ipynb"
    assert not copied.is_symlink()
    assert copied.read_bytes() == (shipped_notebooks_dir() / "00-start-here.ipynb").read_bytes()
    assert (shared / "00-start-here.ipynb.partial").is_symlink()  # left as it was
    # No temporary name is left behind.
    assert sorted(p.name for p in shared.iterdir() if p.name.startswith(".")) == []


def test_a_link_at_a_notebooks_name_or_as_the_folder_is_left_alone(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "00-start-here.ipynb").symlink_to(outside / "made-through-a-link.ipynb")  # dangling
    (shared / "README.md").symlink_to(outside)
    fifo = shared / "01-torch-compile.ipynb"
    os.mkfifo(fifo)
    report = copy_tutorials(shared)
    assert list(outside.iterdir()) == []
    assert report.skipped == [
        "00-start-here.ipynb: a symbolic link is there (never followed): left as it is",
        "01-torch-compile.ipynb: something that is not a file is there: left as it is",
        "README.md: a symbolic link is there (never followed): left as it is",
    ]
    assert report.copied == [
        f
        for f in shipped_files()
        if f not in {"00-start-here.ipynb", "01-torch-compile.ipynb"} and f != "README.md"
    ]
    assert (shared / "00-start-here.ipynb").is_symlink()
    assert "left alone: 00-start-here.ipynb: a symbolic link" in report.describe()


def test_a_folder_that_is_a_link_is_never_entered(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / "course").symlink_to(outside, target_is_directory=True)
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(
            NotADirectoryError, match="course is a symbolic link, not a folder \\(never followed\\)"
        ):
            open_folder(top, ["course", "gpu"])
    finally:
        os.close(top)
    assert list(outside.iterdir()) == []


def test_without_hard_links_each_file_is_still_new_and_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")  # as FAT and some FUSE say

    monkeypatch.setattr(os, "link", no_links)
    victim = tmp_path / "victims-file"
    victim.write_bytes(b"mine")
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "README.md").symlink_to(victim)
    report = copy_tutorials(tmp_path / "t")
    assert report.copied == [f for f in shipped_files() if f != "README.md"]
    assert victim.read_bytes() == b"mine"
    names = sorted(p.name for p in (tmp_path / "t").iterdir())
    assert names == sorted(shipped_files())  # no temporary name left
    first = tmp_path / "t" / "00-start-here.ipynb"
    assert first.read_bytes() == (shipped_notebooks_dir() / "00-start-here.ipynb").read_bytes()


def test_a_name_too_long_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(tmp_path / ("x" * 300))]) == 1
    assert "File name too long" in capsys.readouterr().err
