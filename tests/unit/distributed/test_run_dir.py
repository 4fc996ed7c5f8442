"""``%%torchrun``'s run folder: made by mkdtemp, and removed only while it is still that folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_gpu.distributed.result import RESULT_FILE, _send
from jupyter_gpu.distributed.script import LaunchSpec, remove_run_dir, write_run_dir


def make(tmp_path: Path) -> Path:
    return write_run_dir("print(1)", LaunchSpec(2, "gloo"), cwd=str(tmp_path), base=str(tmp_path))


def test_the_run_folder_it_made_is_removed(tmp_path: Path) -> None:
    run_dir = make(tmp_path)
    (run_dir / "rank0.log").write_text("ranks write here too")
    (run_dir / "sub").mkdir()
    (run_dir / "sub" / "rank1.stack").write_text("faulthandler's file")
    result = remove_run_dir(run_dir)
    assert not run_dir.exists()
    assert result.failed == ()
    assert result.files_removed == 5  # cell.py, run.json, main.py, the log and sub/rank1.stack
    assert "not a run folder made here" in remove_run_dir(run_dir).failed[0]  # once only


def test_anything_else_is_left(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data.bin").write_bytes(b"d")
    link = tmp_path / "torchrun-link"  # named as a run folder, but a link: never followed
    link.symlink_to(precious, target_is_directory=True)
    assert remove_run_dir(link).failed
    assert (precious / "data.bin").exists()
    assert link.is_symlink()
    other = tmp_path / "torchrun-notes"  # named as write_run_dir names its folders, not made here
    other.mkdir()
    assert remove_run_dir(other).failed
    assert other.exists()


def test_a_run_folder_swapped_for_a_link_is_not_followed(tmp_path: Path) -> None:
    run_dir = make(tmp_path)
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    run_dir.rename(tmp_path / "moved")  # after it was made, a link takes its name
    run_dir.symlink_to(precious, target_is_directory=True)
    result = remove_run_dir(run_dir)
    assert "not the folder that was made here" in result.failed[0]
    assert (precious / "thesis.tex").read_text() == "years of work"
    assert run_dir.is_symlink()
    assert (tmp_path / "moved" / "cell.py").exists()  # the real one was moved: left too


def test_a_link_inside_is_removed_never_followed(tmp_path: Path) -> None:
    run_dir = make(tmp_path)
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data.bin").write_bytes(b"d")
    (run_dir / "to-precious").symlink_to(precious, target_is_directory=True)
    (run_dir / "to-file").symlink_to(precious / "data.bin")
    assert remove_run_dir(run_dir).failed == ()
    assert not run_dir.exists()
    assert (precious / "data.bin").read_bytes() == b"d"


def test_each_result_replaces_this_ranks_last_one_and_nothing_else(tmp_path: Path) -> None:
    run_dir = make(tmp_path)
    _send(run_dir, memoryview(b"first"))
    _send(run_dir, memoryview(b"second, longer"))
    assert (run_dir / RESULT_FILE).read_bytes() == b"second, longer"
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "cell.py",
        "main.py",
        RESULT_FILE,
        "run.json",
    ]
    (run_dir / RESULT_FILE).unlink()  # someone else's file put in its place
    (run_dir / RESULT_FILE).write_bytes(b"not this rank's")
    with pytest.raises(FileExistsError, match="not the one this rank wrote"):
        _send(run_dir, memoryview(b"third"))
    assert (run_dir / RESULT_FILE).read_bytes() == b"not this rank's"
