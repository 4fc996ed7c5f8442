"""Where GPU runs write what they measured (``benchmarks/outputs.py``): one rule, kept."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks.outputs import out_dir, write_json, write_text

ROOT = Path(__file__).resolve().parents[2]
GPU_TESTS = ROOT / "tests" / "gpu"


def test_session_folder_wins_over_the_machine_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # session.sh sets both: a file written to $OUT lands beside its archive, not in it, and a
    # background part's collect copies back only the archive.
    monkeypatch.setenv("OUT", str(tmp_path / "machine"))
    monkeypatch.setenv("JUPYTER_GPU_OUT", str(tmp_path / "session" / "figures"))
    path = write_json("figures.json", {"ratio": 1.5, "where": tmp_path})
    assert path == tmp_path / "session" / "figures" / "figures.json"
    assert json.loads(path.read_text()) == {"ratio": 1.5, "where": str(tmp_path)}
    assert not (tmp_path / "machine").exists()


def test_machine_folder_serves_a_check_run_by_hand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JUPYTER_GPU_OUT", raising=False)
    monkeypatch.setenv("OUT", str(tmp_path))
    assert out_dir() == tmp_path
    assert write_text("cells.log", "a\nb") == tmp_path / "cells.log"
    assert (tmp_path / "cells.log").read_text() == "a\nb"


def test_a_given_path_wins_over_the_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A benchmark's --json PATH.
    monkeypatch.setenv("JUPYTER_GPU_OUT", str(tmp_path / "session"))
    path = write_json("figures.json", [1], indent=1, path=tmp_path / "here" / "mine.json")
    assert path == tmp_path / "here" / "mine.json"
    assert json.loads(path.read_text()) == [1]
    assert not (tmp_path / "session").exists()


def test_nothing_is_written_without_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JUPYTER_GPU_OUT", raising=False)
    monkeypatch.delenv("OUT", raising=False)
    monkeypatch.chdir(tmp_path)
    assert out_dir() is None
    assert write_json("figures.json", {}) is None
    assert list(tmp_path.iterdir()) == []


def test_no_gpu_check_or_benchmark_reads_the_folders_itself() -> None:
    # Three rules lived side by side before (OUT only, JUPYTER_GPU_OUT only, both).
    reads = re.compile(r"""environ(\.get)?[\[(]\s*["'](JUPYTER_GPU_OUT|OUT)["']""")
    checks = [*GPU_TESTS.glob("test_*.py"), GPU_TESTS / "conftest.py", GPU_TESTS / "magic_shell.py"]
    checks += [p for p in (ROOT / "benchmarks").glob("*.py") if p.name != "outputs.py"]
    offenders = [p.name for p in checks if reads.search(p.read_text(encoding="utf-8"))]
    assert offenders == []
