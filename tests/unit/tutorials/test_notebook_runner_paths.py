"""The GPU notebook runner's HTML copies name no folder of the machine they ran on; its archive.

The folders are this checkout and a scratch folder made here, so that no path of any one
machine is written into the test.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from tests.helpers import ROOT, load_script

runner = load_script(ROOT / "tests" / "gpu" / "run_notebooks_gpu.py")


def places(scratch: Path) -> dict[str, str]:
    return {str(scratch): "$RUN", str(ROOT): ".", str(scratch.parent): "$TMPDIR"}


def test_each_local_folder_becomes_its_stand_in(tmp_path: Path) -> None:
    scratch = tmp_path / "run"
    text = (
        f"File {ROOT}/jupyter_gpu/tutorials/checks_06.py:12; cache at "
        f"{scratch}/inductor-cache/sh/c.py; cell {tmp_path}/ipykernel_4064/40.py"
    )
    assert runner.local_paths_hidden(text, places(scratch)) == (
        "File ./jupyter_gpu/tutorials/checks_06.py:12; cache at $RUN/inductor-cache/sh/c.py; "
        "cell $TMPDIR/ipykernel_4064/40.py"
    )


def test_only_a_path_inside_a_whole_folder_is_replaced(tmp_path: Path) -> None:
    scratch = tmp_path / "run"
    text = (
        f"{tmp_path}files/a, /var{scratch}/b, {ROOT}2/c, /usr/lib/python3.12, "
        f"<code>{tmp_path}</code> on tmpfs"
    )
    assert runner.local_paths_hidden(text, places(scratch)) == text


def test_a_home_of_slash_stands_in_for_nothing() -> None:
    assert runner.local_paths_hidden("/usr/lib/x", {"/": "~"}) == "/usr/lib/x"


def test_the_archive_leaves_out_a_file_too_large_to_come_back_and_names_it(
    tmp_path: Path,
) -> None:
    # Notebook 05's Distributed Checkpoint (GiB) beside the executed notebooks lost a run.
    executed, results = tmp_path / "executed", tmp_path / "results" / "full"
    (executed / "05-dcp-checkpoint").mkdir(parents=True)
    results.mkdir(parents=True)
    (executed / "05-multi-gpu.ipynb").write_text("{}")
    (executed / "05-dcp-checkpoint" / "__0_0.distcp").write_bytes(
        b"\0" * (runner.LARGEST_PACKED + 1)
    )
    (results / "05-multi-gpu.json").write_text("{}")
    archive = tmp_path / "out.tar.gz"
    left = runner.write_archive(archive, executed, results)
    assert left == ["executed/05-dcp-checkpoint/__0_0.distcp: 4.0 MiB"]
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
        note = tar.extractfile("executed/left-out.txt")
        assert note is not None
        assert "05-dcp-checkpoint/__0_0.distcp: 4.0 MiB" in note.read().decode()
    assert "executed/05-multi-gpu.ipynb" in names
    assert "results/full/05-multi-gpu.json" in names
    assert "executed/05-dcp-checkpoint/__0_0.distcp" not in names
