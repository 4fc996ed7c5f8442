"""The GPU notebook runner's HTML copies name no folder of the machine they ran on.

The folders are this checkout and a scratch folder made here, so that no path of any one
machine is written into the test.
"""

from __future__ import annotations

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
