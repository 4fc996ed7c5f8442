"""``%%torchrun``'s run folder: made by mkdtemp, and removed only when it is still that folder."""

from __future__ import annotations

from pathlib import Path

from jupyter_gpu.distributed.script import LaunchSpec, remove_run_dir, write_run_dir


def test_the_run_folder_it_made_is_removed(tmp_path: Path) -> None:
    run_dir = write_run_dir(
        "print(1)", LaunchSpec(2, "gloo"), cwd=str(tmp_path), base=str(tmp_path)
    )
    (run_dir / "rank0.log").write_text("ranks write here too")
    remove_run_dir(run_dir)
    assert not run_dir.exists()
    remove_run_dir(run_dir)  # gone already: nothing to do


def test_anything_else_is_left(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data.bin").write_bytes(b"d")
    link = tmp_path / "torchrun-link"  # named as a run folder, but a link: never followed
    link.symlink_to(precious, target_is_directory=True)
    remove_run_dir(link)
    assert (precious / "data.bin").exists()
    assert link.is_symlink()
    other = tmp_path / "notes"
    other.mkdir()
    remove_run_dir(other)  # not named as write_run_dir names its folders
    assert other.exists()
