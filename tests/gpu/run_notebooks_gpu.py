"""Execute every tutorial notebook at full size on the GPU machine and collect the evidence.

    python tests/gpu/run_notebooks_gpu.py            # all notebooks, about 5 minutes on one H200
    python tests/gpu/run_notebooks_gpu.py --only 01,02
    python tests/gpu/run_notebooks_gpu.py --tier 16gb   # emulate a T4 (16 GB, no bf16)

``--tier`` sets ``JUPYTER_GPU_TIER`` for the notebooks (see ``jupyter_gpu/tutorials/tiers.py``):
each caps torch's allocator at the tier's budget and, for 16gb, takes the fp16 + GradScaler path.
A tier's results go to ``results/<tier>/`` and the archive is ``notebooks-executed-<tier>.tar.gz``.

Split over two runs, extract both archives' ``results/`` into one folder and run
``benchmarks/update_results.py`` on it.

For each notebook in ``notebooks/``: execute it with nbclient (no JUPYTER_GPU_SMOKE: full size),
from a scratch working directory, with a fresh torch.compile cache (so compile times are cold,
as a workshop participant first sees them) and ``JUPYTER_GPU_RESULTS_DIR`` set so each notebook
saves its figures. Then:

- write the executed copies (``.ipynb``, and ``.html`` when nbconvert is installed) and the
  figures' JSON into ``$OUT/notebooks-executed.tar.gz`` (one file: the device tool brings back
  at most 8 files);
- run ``benchmarks/update_results.py`` on the figures, writing ``$OUT/RESULTS.md`` (a copy of
  ``benchmarks/RESULTS.md`` with this run's notebooks replaced in the tutorials section, the
  others kept). To update the repository's file, run ``benchmarks/update_results.py`` on the
  archive's ``results/`` folder there (it only touches its own section, so other sections
  edited meanwhile are kept);
- print a table: each notebook's status, time and error cells, then every target check.

Exit status: 0 when every notebook ran without an error cell and every target was met; 1 when a
notebook failed; 3 when all ran but a target was missed; 2 without a CUDA GPU.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"


def executed_errors(nb: object) -> list[str]:
    """``cell N: Ename: message`` for every unexpected error output in an executed notebook.

    Cells tagged ``raises-exception`` fail on purpose: an unanswered exercise's check cell, or
    notebook 05's hung collective. An out-of-memory error counts even there.
    """
    errors = []
    for i, cell in enumerate(nb.cells):  # type: ignore[attr-defined]  # an nbformat NotebookNode
        expected = "raises-exception" in cell.get("metadata", {}).get("tags", [])
        for out in cell.get("outputs", []):
            if out.get("output_type") != "error":
                continue
            if expected and "OutOfMemory" not in str(out.get("ename")):
                continue
            errors.append(f"cell {i}: {out.get('ename')}: {str(out.get('evalue'))[:200]}")
    return errors


def out_of_memory(nb: object) -> bool:
    """Whether any output of an executed notebook mentions a CUDA out-of-memory error."""
    for cell in nb.cells:  # type: ignore[attr-defined]  # an nbformat NotebookNode
        if "raises-exception" in cell.get("metadata", {}).get("tags", []):
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" and "OutOfMemory" in str(out.get("ename")):
                return True
    return False


def local_paths_hidden(text: str, places: Mapping[str, str]) -> str:
    """``text`` with each of this machine's folders in ``places`` written as its stand-in.

    The HTML copies are committed (``benchmarks/h200-notebooks/``), and no committed file names
    a path outside the repository: a path in the run's scratch folder becomes ``$RUN/...``, in
    the repository ``./...``, in the temporary folder ``$TMPDIR/...``, in the home folder
    ``~/...``, in Python's prefix (its packages, in warnings) ``$PYTHON/...``. The longest
    folder goes first (the scratch folder lies in the temporary one). Only a path inside a
    folder is replaced, where the folder's name stands whole: ``/tmp/x``, not ``/tmpfiles/x``
    or ``/var/tmp/x``, and not a lesson's own ``/tmp`` (notebook 06 says what ``/tmp`` is on
    this machine).
    """
    for place in sorted(places, key=len, reverse=True):
        folder = place.rstrip("/")
        if not folder:  # a home of "/" (some containers) would stand in for every slash
            continue
        pattern = r"(?<![\w.-])" + re.escape(folder) + r"(?=/)"
        # Backslashes escaped: re.sub reads none of the stand-in as a group reference.
        text = re.sub(pattern, places[place].replace("\\", "\\\\"), text)
    return text


def to_html(nb: Any, path: Path, places: Mapping[str, str]) -> bool:
    """Write ``nb`` as HTML beside ``path`` if nbconvert is available; True if written.

    ``places``: the local folders to hide in it, as ``local_paths_hidden`` takes them.
    """
    try:
        from nbconvert import HTMLExporter
    except ImportError:
        return False
    # nbconvert finds its templates on the Jupyter data path; wheels installed with
    # ``pip --target`` (the GPU machine) put them under <target>/share/jupyter.
    import nbconvert

    extra = Path(nbconvert.__file__).resolve().parents[1] / "share" / "jupyter"
    if extra.is_dir() and str(extra) not in os.environ.get("JUPYTER_PATH", ""):
        os.environ["JUPYTER_PATH"] = os.pathsep.join(
            p for p in (str(extra), os.environ.get("JUPYTER_PATH", "")) if p
        )
    try:
        body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    except Exception as err:  # noqa: BLE001 (an HTML copy is a convenience: never lose the run)
        print(f"  (no HTML copy: {type(err).__name__}: {err})", flush=True)
        return False
    path.write_text(local_paths_hidden(body, places))
    return True


#: The largest file packed: a notebook's artefact above it stays behind, named in left-out.txt.
#: Notebook 05 writes its Distributed Checkpoint beside itself (the GPT's weights and AdamW
#: state: GiB at full size); packed, the archive was over the 16 MiB a file may have to come
#: back from the GPU machine, the call's time ran out while packing, and 05's and 06's figures
#: were lost (2026-12-05).
LARGEST_PACKED = 4 * 2**20


def write_archive(archive: Path, workdir: Path, results_dir: Path) -> list[str]:
    """Pack the executed notebooks and the figures' JSON into one ``.tar.gz``.

    A file over :data:`LARGEST_PACKED` is left out and named, with its size, in
    ``executed/left-out.txt``. Returns those lines.
    """
    left_out: list[str] = []

    def small(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if info.isfile() and info.size > LARGEST_PACKED:
            left_out.append(f"{info.name}: {info.size / 2**20:,.1f} MiB")
            return None
        return info

    partial = archive.with_suffix(".partial")
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(workdir, arcname="executed", filter=small)
        if results_dir.exists():
            tar.add(results_dir, arcname=f"results/{results_dir.name}")
        if left_out:
            note = (
                "left out (over the largest file packed):\n" + "\n".join(left_out) + "\n"
            ).encode()
            info = tarfile.TarInfo("executed/left-out.txt")
            info.size = len(note)
            tar.addfile(info, io.BytesIO(note))
    partial.replace(archive)
    return left_out


def run_notebook(path: Path, workdir: Path, timeout: int, deadline: float | None = None) -> dict:
    """Execute one notebook; with ``deadline`` (a ``time.monotonic()`` value) start no cell after
    it, and keep the cells that ran: a call-length limit then cuts between cells, not inside the
    kernel, and the executed copy still holds everything measured before the cut."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    # coalesce_streams: the executed copy keeps a progress bar's last state, as JupyterLab shows
    # it, not every "\r" update it sent (off by default in nbclient).
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
        coalesce_streams=True,
    )
    start = time.perf_counter()
    failure = None
    cut_at = None
    try:
        with client.setup_kernel():
            for index, cell in enumerate(nb.cells):
                if deadline is not None and time.monotonic() > deadline:
                    cut_at = index
                    break
                client.execute_cell(cell, index)
    except CellExecutionError as exc:
        failure = str(exc).strip().splitlines()[-1][:300]
    except Exception as exc:  # noqa: BLE001 (a dead kernel or a timeout: record it, go on)
        failure = f"{type(exc).__name__}: {exc}"[:300]
    elapsed = time.perf_counter() - start
    if cut_at is not None:
        failure = f"cut by --deadline before cell {cut_at} of {len(nb.cells)}"
    out_ipynb = workdir / path.name
    nbformat.write(nb, out_ipynb)
    places = {
        str(workdir.parent): "$RUN",
        str(ROOT): ".",
        tempfile.gettempdir(): "$TMPDIR",
        str(Path.home()): "~",
        sys.prefix: "$PYTHON",
    }
    html = to_html(nb, out_ipynb.with_suffix(".html"), places)
    return {
        "notebook": path.stem,
        "seconds": elapsed,
        "failure": failure,
        "errors": executed_errors(nb),
        "oom": out_of_memory(nb),
        "ipynb": out_ipynb,
        "html": out_ipynb.with_suffix(".html") if html else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma list of notebook number prefixes, e.g. 01,04")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per cell (300)")
    parser.add_argument(
        "--deadline",
        type=float,
        help="seconds from now after which no further cell starts (a run cut short keeps its part)",
    )
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ROOT / "gpu-run")))
    parser.add_argument("--allow-cpu", action="store_true", help="run without a GPU (testing)")
    parser.add_argument("--smoke", action="store_true", help="smoke sizes (testing the runner)")
    parser.add_argument(
        "--keep-cache", action="store_true", help="use the usual torch.compile cache (warm)"
    )
    parser.add_argument(
        "--tier", help="emulate a size tier (16gb, 24gb, 40gb, 80gb) with JUPYTER_GPU_TIER"
    )
    parser.add_argument(
        "--summary", type=Path, help="also write the run's summary as JSON here ($JUPYTER_GPU_OUT)"
    )
    args = parser.parse_args(argv)

    import torch

    if not torch.cuda.is_available() and not args.allow_cpu:
        print("no CUDA GPU: these runs are for the GPU machine (use --allow-cpu to test)")
        return 2
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    print(f"{gpu}; torch {torch.__version__}; {time.strftime('%Y-%m-%d %H:%M')}", flush=True)

    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"))
    if args.only:
        wanted = set(args.only.split(","))
        paths = [p for p in paths if p.name[:2] in wanted]
    args.out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="notebooks-gpu-"))
    label = args.tier or "full"
    results_dir = scratch / "results" / label
    workdir = scratch / "executed"
    workdir.mkdir()
    if args.smoke:
        os.environ["JUPYTER_GPU_SMOKE"] = "1"
    else:
        os.environ.pop("JUPYTER_GPU_SMOKE", None)
    os.environ["JUPYTER_GPU_RESULTS_DIR"] = str(results_dir)
    if args.tier:
        os.environ["JUPYTER_GPU_TIER"] = args.tier
    else:
        os.environ.pop("JUPYTER_GPU_TIER", None)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    if not args.keep_cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(scratch / "inductor-cache")

    archive = args.out / (
        "notebooks-executed.tar.gz" if not args.tier else f"notebooks-executed-{args.tier}.tar.gz"
    )
    runs = []
    left_out: list[str] = []
    deadline = time.monotonic() + args.deadline if args.deadline else None
    for path in paths:
        print(f"running {path.name} ...", flush=True)
        run = run_notebook(path, workdir, args.timeout, deadline)
        runs.append(run)
        status = "ok" if not run["failure"] else f"FAILED: {run['failure']}"
        print(f"  {run['seconds']:.0f} s, {len(run['errors'])} error cell(s); {status}", flush=True)
        # After each notebook: a run cut short keeps what it did.
        left_out = write_archive(archive, workdir, results_dir)
    if left_out:
        print("left out of the archive (over the largest file packed):", *left_out, sep="\n  ")

    results_md = args.out / f"RESULTS-{label}.md"
    shutil.copy(ROOT / "benchmarks" / "RESULTS.md", results_md)
    update = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "update_results.py"), str(results_dir)]
        + ["--results-md", str(results_md)]
        + (["--allow-any-mode"] if args.allow_cpu or args.smoke else [])
        + (["--tier", args.tier] if args.tier else []),
        capture_output=True,
        text=True,
        check=False,
    )
    print(update.stdout.strip() or update.stderr.strip())

    print("\n| notebook | seconds | error cells | status |\n|---|---:|---:|---|")
    for run in runs:
        status = "ok" if not run["failure"] else f"FAILED: {run['failure']}"
        print(f"| {run['notebook']} | {run['seconds']:.0f} | {len(run['errors'])} | {status} |")
    print(f"| total | {sum(r['seconds'] for r in runs):.0f} | | |")
    missed = 0
    print("\n| notebook | target | measured | met |\n|---|---|---:|---|")
    for path in sorted(results_dir.glob("*.json")):
        data = json.loads(path.read_text())
        for check in data["checks"]:
            met = {True: "yes", False: "NO", None: "n/a"}[check["met"]]
            missed += check["met"] is False
            low, high = check.get("low"), check.get("high")  # a ratio's interval, where it has one
            span = f" ({low:.2f}-{high:.2f})" if low is not None else ""
            print(
                f"| {data['notebook']} | {check['label']} >= {check['target']:g} | "
                f"{check['value']:.2f}{span} | {met} |"
            )
    print(f"\nexecuted notebooks and figures: {archive}; RESULTS.md: {results_md}")
    summary = {
        "tier": label,
        "gpu": gpu,
        "torch": torch.__version__,
        "notebooks": [
            {k: (str(v) if isinstance(v, Path) else v) for k, v in run.items()} for run in runs
        ],
        "figures": [json.loads(p.read_text()) for p in sorted(results_dir.glob("*.json"))],
        "missed_targets": missed,
    }
    if args.summary:
        args.summary.parent.mkdir(parents=True, exist_ok=True)
        args.summary.write_text(json.dumps(summary, indent=1) + "\n")
    if any(r["failure"] or r["errors"] or r["oom"] for r in runs):
        return 1
    return 3 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
