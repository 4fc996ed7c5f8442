"""Which executed copies in ``benchmarks/*-notebooks/`` ran the code their notebook has now.

    python benchmarks/executed_copies.py
    python benchmarks/executed_copies.py --copies DIR [--copies DIR...] --notebooks DIR

A teacher shows a copy when the room's GPUs are too slow (``docs/teaching.md``, *Executed
copies*), and a copy is only as current as the run it came from. This compares each copy's code
cells with its notebook's, cell by cell, by the cell ids nbconvert writes into the HTML
(``id="cell-id=..."``), and prints one row a notebook and folder (the folder names the GPU that
ran its copies): the code cells that are the same, changed, not in the copy, and only in the
copy. A copy is *current* when every code cell is the same.

It reads code cells only: a current copy may still predate a change to a markdown cell or to
``jupyter_gpu``'s own code, which the HTML does not record. Exit status 0 when every notebook has
a current copy in one of the folders, 1 otherwise.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# nbconvert's lab template: each code cell's div carries its id, and its source is the first
# highlighted <pre> inside it (Pygments spans around every token).
_CODE_CELL = re.compile(
    r'<div class="jp-Cell jp-CodeCell[^"]*" id="cell-id=([^"]+)">.*?'
    r'<div class="highlight[^"]*"><pre>(.*?)</pre>',
    re.S,
)
_TAG = re.compile(r"<[^>]+>")
# The machine line every notebook's first cell prints (``tutorials/sizing.py``, ``Machine``):
# "GPU: NVIDIA H100 80GB HBM3 (79 GiB); torch 2.11.0+cu130, CUDA 13.0", at the start of a line of
# an output's <pre>. Searched in the HTML as it is: stripping every tag of a page takes ~0.5 s.
_GPU_LINE = re.compile(r"(?:^|<pre>)GPU: ([^<\n]+?) \([\d.,]+ GiB\); torch ", re.M)


@dataclass(frozen=True)
class CopyCheck:
    """One notebook against its executed copy: code cell ids by what became of them."""

    notebook: str
    #: The GPU the copy ran on, from its machine line (None: no such line).
    gpu: str | None
    same: list[str]
    changed: list[str]
    not_in_copy: list[str]
    only_in_copy: list[str]

    @property
    def current(self) -> bool:
        return not (self.changed or self.not_in_copy or self.only_in_copy)


def copy_code_cells(page: str) -> dict[str, str]:
    """The code cells of an nbconvert HTML page, by cell id, as source text."""
    return {
        cell_id: html.unescape(_TAG.sub("", source)).strip()
        for cell_id, source in _CODE_CELL.findall(page)
    }


def copy_gpu(page: str) -> str | None:
    """The GPU an executed copy ran on, as its notebook's machine line names it."""
    found = _GPU_LINE.search(page)
    return html.unescape(found.group(1)) if found else None


def notebook_code_cells(path: Path) -> dict[str, str]:
    """The code cells of a notebook file, by cell id."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return {
        cell["id"]: "".join(cell["source"]).strip() for cell in cells if cell["cell_type"] == "code"
    }


def check(notebook: Path, copy: Path) -> CopyCheck:
    """Compare ``notebook``'s code cells with those of its HTML ``copy``."""
    now = notebook_code_cells(notebook)
    page = copy.read_text(encoding="utf-8")
    ran = copy_code_cells(page)
    return CopyCheck(
        notebook=notebook.stem,
        gpu=copy_gpu(page),
        same=[i for i in now if i in ran and ran[i] == now[i]],
        changed=[i for i in now if i in ran and ran[i] != now[i]],
        not_in_copy=[i for i in now if i not in ran],
        only_in_copy=[i for i in ran if i not in now],
    )


def _verdict(result: CopyCheck) -> str:
    if result.current:
        return "current"
    parts = [
        f"{label} {', '.join(ids)}"
        for label, ids in (
            ("changed:", result.changed),
            ("new:", result.not_in_copy),
            ("gone:", result.only_in_copy),
        )
        if ids
    ]
    return "stale (" + "; ".join(parts) + ")"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    parser.add_argument(
        "--copies",
        type=Path,
        action="append",
        help="a folder of executed copies (repeatable; default: every benchmarks/*-notebooks/)",
    )
    args = parser.parse_args(argv)
    folders = args.copies or sorted((ROOT / "benchmarks").glob("*-notebooks"))
    notebooks = sorted(args.notebooks.glob("*.ipynb"))
    current: set[str] = set()
    for folder in folders:
        print(f"{folder.name}/")
        for notebook in notebooks:
            copy = folder / f"{notebook.stem}.html"
            if not copy.exists():
                print(f"  {notebook.stem:20s} no copy")
                continue
            result = check(notebook, copy)
            total = len(result.same) + len(result.changed) + len(result.not_in_copy)
            print(
                f"  {notebook.stem:20s} on {result.gpu or 'no GPU line'}: {len(result.same)} "
                f"of {total} code cells the same: {_verdict(result)}"
            )
            if result.current:
                current.add(notebook.stem)
    missing = [n.stem for n in notebooks if n.stem not in current]
    print(
        f"no current copy: {', '.join(missing)}" if missing else "every notebook has a current copy"
    )
    return 1 if missing or not notebooks else 0


if __name__ == "__main__":
    sys.exit(main())
