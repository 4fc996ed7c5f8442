"""Every tutorial notebook runs top to bottom with nbclient in smoke mode, with no GPU.

Smoke mode (``JUPYTER_GPU_SMOKE=1``) picks tiny sizes so that each notebook finishes in well
under 90 s on two CPU cores. CUDA is hidden (``CUDA_VISIBLE_DEVICES=``) so that these runs also
prove the no-GPU path on a machine that has one: each notebook must say "no GPU" and skip its
CUDA-only parts without an error. ``JUPYTER_GPU_NOTEBOOK_OUT=DIR`` keeps the executed copies.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
SMOKE_BUDGET_S = 90.0


def test_there_are_notebooks() -> None:
    names = [p.stem for p in NOTEBOOKS]
    for expected in (
        "00-start-here",
        "01-torch-compile",
        "02-mixed-precision",
        "03-gpu-memory",
        "04-profiling",
    ):
        assert expected in names


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
    client = NotebookClient(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
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
    assert "✓ correct" in text, "every notebook's exercise solutions must pass their checks"
    saved = json.loads((results_dir / f"{path.stem}.json").read_text())
    assert saved["machine"]["mode"] == "smoke"
    assert saved["machine"]["device"] == "cpu"
    assert saved["figures"], "the summary must hold measured figures"
    assert all(c["met"] is None for c in saved["checks"]), "targets apply to full-size GPU runs"
    print(f"{path.stem}: {elapsed:.1f} s in smoke mode")
    assert elapsed < SMOKE_BUDGET_S, (
        f"{path.stem} took {elapsed:.0f} s (budget {SMOKE_BUDGET_S:.0f} s)"
    )
