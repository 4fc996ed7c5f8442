"""benchmarks/executed_copies.py tells a current executed copy from a stale one, cell by cell."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.helpers import ROOT, load_script

copies = load_script(ROOT / "benchmarks" / "executed_copies.py")
runner = load_script(ROOT / "tests" / "gpu" / "run_notebooks_gpu.py")


@pytest.fixture(scope="module")
def copy_of_00(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Notebook 00 as the GPU runner writes its HTML copy (nbconvert's lab template)."""
    folder = tmp_path_factory.mktemp("copies")
    nb = nbformat.read(ROOT / "notebooks" / "00-start-here.ipynb", as_version=4)
    assert runner.to_html(nb, folder / "00-start-here.html", {})
    return folder / "00-start-here.html"


def _edited(tmp_path: Path, edit: Callable[[list[dict[str, Any]]], None]) -> Path:
    """Notebook 00 with ``edit`` applied to its cells (each source one string), in tmp_path."""
    nb = json.loads((ROOT / "notebooks" / "00-start-here.ipynb").read_text())
    for cell in nb["cells"]:
        cell["source"] = "".join(cell["source"])
    edit(nb["cells"])
    path = tmp_path / "00-start-here.ipynb"
    path.write_text(json.dumps(nb))
    return path


def test_a_copy_of_the_notebook_as_it_is_reads_as_current(copy_of_00: Path) -> None:
    result = copies.check(ROOT / "notebooks" / "00-start-here.ipynb", copy_of_00)
    code = copies.notebook_code_cells(ROOT / "notebooks" / "00-start-here.ipynb")
    # every code cell read back, the HTML's escapes (<, >, &, quotes) undone
    assert copies.copy_code_cells(copy_of_00.read_text()) == code
    assert any(c in source for source in code.values() for c in "<>&\"'")
    assert result.current
    assert len(result.same) == len(code)


def test_a_changed_a_new_and_a_removed_code_cell_make_it_stale(
    copy_of_00: Path, tmp_path: Path
) -> None:
    def edit(cells: list[dict[str, Any]]) -> None:
        code = [c for c in cells if c["cell_type"] == "code"]
        code[1]["source"] += "\nprint('one more line')"
        cells.remove(code[2])
        cells.append({**code[0], "id": "brand-new", "source": "print('new')"})

    notebook = _edited(tmp_path, edit)
    code_ids = list(copies.copy_code_cells(copy_of_00.read_text()))
    result = copies.check(notebook, copy_of_00)
    assert not result.current
    assert result.changed == [code_ids[1]]
    assert result.not_in_copy == ["brand-new"]
    assert result.only_in_copy == [code_ids[2]]
    assert copies.main(["--notebooks", str(tmp_path), "--copies", str(copy_of_00.parent)]) == 1


def test_the_command_exits_0_only_when_every_copy_is_current(
    copy_of_00: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "00-start-here.ipynb").write_bytes(
        (ROOT / "notebooks" / "00-start-here.ipynb").read_bytes()
    )
    folder = str(copy_of_00.parent)
    assert copies.main(["--notebooks", str(notebooks), "--copies", folder]) == 0
    assert "current" in capsys.readouterr().out
    (notebooks / "01-torch-compile.ipynb").write_bytes(
        (ROOT / "notebooks" / "01-torch-compile.ipynb").read_bytes()
    )
    assert copies.main(["--notebooks", str(notebooks), "--copies", folder]) == 1
    out = capsys.readouterr().out
    assert "  01-torch-compile     no copy" in out
    assert out.endswith("no current copy: 01-torch-compile\n")


def test_the_gpu_is_read_from_the_machine_line_and_a_copy_without_one_has_none(
    copy_of_00: Path,
) -> None:
    line = "GPU: NVIDIA H100 80GB HBM3 (79 GiB); torch 2.11.0+cu130, CUDA 13.0"
    assert copies.copy_gpu(f"<pre>{line}\nfull sizes\n</pre>") == "NVIDIA H100 80GB HBM3"
    assert copies.copy_gpu(f"<pre>full sizes\n{line}\n</pre>") == "NVIDIA H100 80GB HBM3"
    escaped = "<pre>GPU: R&amp;D board (16 GiB); torch 2.11.0</pre>"
    assert copies.copy_gpu(escaped) == "R&D board"
    assert copies.copy_gpu(f"<pre>print('{line}')</pre>") is None  # code, not the line
    # an unexecuted notebook printed nothing; its code names no GPU either
    assert copies.copy_gpu(copy_of_00.read_text()) is None


@pytest.mark.parametrize(
    "folder", sorted((ROOT / "benchmarks").glob("*-notebooks")), ids=lambda p: p.name
)
def test_each_committed_copy_ran_on_the_gpu_its_folder_names(folder: Path) -> None:
    # h100-notebooks/ holds an H100's copies: a copy filed under another GPU's folder would show
    # a room that GPU's figures under the wrong name.
    gpu = folder.name.removesuffix("-notebooks").upper()
    pages = sorted(folder.glob("*.html"))
    assert pages
    for page in pages:
        ran_on = copies.copy_gpu(page.read_text(encoding="utf-8"))
        assert ran_on is not None, page.name
        assert gpu in ran_on.upper().split(), (page.name, ran_on)
