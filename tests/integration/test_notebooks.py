"""Every tutorial notebook runs top to bottom with nbclient in smoke mode, with no GPU.

Smoke mode (``JUPYTER_GPU_SMOKE=1``) picks tiny sizes so that each notebook finishes in well
under 90 s on two CPU cores. CUDA is hidden (``CUDA_VISIBLE_DEVICES=``) so that these runs also
prove the no-GPU path on a machine that has one: each notebook must say "no GPU" and skip its
CUDA-only parts without an error. ``JUPYTER_GPU_NOTEBOOK_OUT=DIR`` keeps the executed copies.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
SMOKE_BUDGET_S = 90.0
# The capstone runs every other notebook's fixes in turn: its smoke budget is 3 minutes.
SMOKE_BUDGETS_S = {"07-capstone": 180.0}


def test_there_are_notebooks() -> None:
    names = [p.stem for p in NOTEBOOKS]
    for expected in (
        "00-start-here",
        "01-torch-compile",
        "02-mixed-precision",
        "03-gpu-memory",
        "04-profiling",
        "05-multi-gpu",
        "06-compile-cache",
        "07-capstone",
    ):
        assert expected in names


# A magic called through the shell object instead of written as a magic.
_MAGIC_THROUGH_SHELL = re.compile(r"get_ipython\(\)\s*\.\s*(run_line_magic|run_cell_magic|magic)\b")
# ``nb.results.claim(...)`` is the exception: a claim is checked in the cell that measured it.
_RESULTS_CALL = re.compile(r"\bresults\s*\.(?!claim\b)")


def _tags(cell: nbformat.NotebookNode) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _hidden(cell: nbformat.NotebookNode) -> bool:
    return bool(cell.get("metadata", {}).get("jupyter", {}).get("source_hidden"))


def _exercise_check(cell: nbformat.NotebookNode) -> bool:
    """A cell that fails until its exercise is answered; other ``raises-exception`` cells show
    an error on purpose (05's hung collective) and have no solution."""
    return "raises-exception" in _tags(cell) and "require(" in cell.source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_student_cells_are_clean(path: Path) -> None:
    """Magics are written as magics; figures are recorded in one hidden bookkeeping cell."""
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i, cell in enumerate(code):
        assert not _MAGIC_THROUGH_SHELL.search(cell.source), (
            f"{path.name}, code cell {i}: write the magic as a magic (%name / %%name), "
            "not through get_ipython()"
        )
    bookkeeping = [c for c in code if "bookkeeping" in _tags(c)]
    assert len(bookkeeping) == 1, (
        f"{path.name}: one cell tagged 'bookkeeping', not {len(bookkeeping)}"
    )
    assert _hidden(bookkeeping[0]), f"{path.name}: the bookkeeping cell is collapsed"
    for i, cell in enumerate(code):
        if "bookkeeping" not in _tags(cell):
            assert not _RESULTS_CALL.search(cell.source), (
                f"{path.name}, code cell {i}: results.* belongs in the bookkeeping cell"
            )
    first = code[0].source
    assert "check_requirements(" in first, f"{path.name}: the first code cell checks dependencies"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_exercises_have_checks_and_collapsed_solutions(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    checks = [i for i, c in enumerate(nb.cells) if _exercise_check(c)]
    solutions = [i for i, c in enumerate(nb.cells) if "solution" in _tags(c)]
    assert checks, f"{path.name}: at least one exercise with a check cell"
    assert len(checks) == len(solutions), f"{path.name}: one solution per check"
    for check_at, solution_at in zip(checks, solutions, strict=True):
        assert check_at < solution_at, f"{path.name}: the solution comes after its check"
        assert "require(" in nb.cells[solution_at].source, "a solution passes the same check"
        assert _hidden(nb.cells[solution_at]), f"{path.name}: solutions are collapsed"
    for i, cell in enumerate(nb.cells):
        if "require(" in cell.source and cell.cell_type == "code":
            assert _exercise_check(cell) or "solution" in _tags(cell), (
                f"{path.name}, cell {i}: a check that calls require( is tagged raises-exception"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{path.name}: a code cell has outputs (strip them)"
            assert cell.execution_count is None, f"{path.name}: execution counts are stored"
    assert nb.cells[0].cell_type == "markdown"
    assert "You will learn" in nb.cells[0].source, "learning goals belong at the top"


def _outputs_text(nb: nbformat.NotebookNode) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if "text" in out:
                parts.append(out["text"])
            for value in out.get("data", {}).values():
                if isinstance(value, str):
                    parts.append(value)
    return "\n".join(parts)


# Claims of counts and of the kernel's own state, not of speed: they hold in a smoke run as on a
# GPU. (On one H100, 2026-12-05, 07's kernel still held its final GPT through a loop variable, and
# the script's ranks beside it ran out of memory; 05 counted DDP's first backward, one bucket.)
HOLD_IN_EVERY_RUN = {
    "05-multi-gpu": ("no_sync_one_allreduce",),
    "07-capstone": ("kernel-models-released",),
}


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_in_smoke_mode(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results_dir = tmp_path / "results"
    workdir = tmp_path / "elsewhere"  # not the notebooks folder: nothing may rely on the cwd
    workdir.mkdir()
    monkeypatch.setenv("JUPYTER_GPU_SMOKE", "1")
    monkeypatch.setenv("JUPYTER_GPU_RESULTS_DIR", str(results_dir))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    # The kernel's compile cache goes to the scratch folder, not the user's /tmp cache.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    nb = nbformat.read(path, as_version=4)
    # coalesce_streams: the executed copy keeps a progress bar's last state, as JupyterLab shows
    # it, not every "\r" update it sent (off by default in nbclient). shutdown_kernel: the kernel's
    # process group is killed once the last cell ran, instead of asked to exit and waited for
    # (nbclient's default): nothing here reads what a kernel does after its last cell, and a
    # kernel that trained ends its interpreter slowly (see distributed/process_end.py).
    client = NotebookClient(
        nb,
        timeout=180,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
        coalesce_streams=True,
        shutdown_kernel="immediate",
    )
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError, with the cell's traceback, on any error
    elapsed = time.perf_counter() - start
    if os.environ.get("JUPYTER_GPU_NOTEBOOK_OUT"):
        out = Path(os.environ["JUPYTER_GPU_NOTEBOOK_OUT"])
        out.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, out / path.name)

    text = _outputs_text(nb)
    assert "no GPU" in text, "the notebook must say plainly that there is no GPU"
    for cell in nb.cells:
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if _exercise_check(cell):
            # an unanswered exercise: its check must fail, and only for that reason
            assert [e["ename"] for e in errors] == ["ExerciseNotSolvedError"], cell.source[:200]
        elif "raises-exception" in _tags(cell):  # an error shown on purpose (05's hung collective)
            continue
        else:
            assert not errors, cell.source[:200]
    saved = json.loads((results_dir / f"{path.stem}.json").read_text())
    assert saved["machine"]["mode"] == "smoke"
    assert saved["machine"]["device"] == "cpu"
    assert saved["figures"], "the summary must hold measured figures"
    assert all(c["met"] is None for c in saved["checks"]), "targets apply to full-size GPU runs"
    claims = {c["key"]: c for c in saved["claims"]}
    for key in HOLD_IN_EVERY_RUN.get(path.stem, ()):
        assert claims[key]["holds"], f"{key}: {claims[key]['measured']}"
    # A Distributed Checkpoint (05's: GiB at full size) is deleted once measured: a student's
    # folder keeps the notebook's small files, not the model and its optimizer state.
    assert not list(workdir.rglob(".metadata")), "a Distributed Checkpoint was left behind"
    print(f"{path.stem}: {elapsed:.1f} s in smoke mode")
    # The budget is a target reported, not asserted: on a shared 2-core machine the time
    # measures the other jobs too (127 s was seen for 01 under a load average of 14).
    budget = SMOKE_BUDGETS_S.get(path.stem, SMOKE_BUDGET_S)
    if elapsed > budget:
        print(f"{path.stem}: over its {budget:.0f} s smoke budget")
