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


@dataclass(frozen=True)
class CopyCheck:
    """One notebook against its executed copy: code cell ids by what became of them."""

    notebook: str
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


def notebook_code_cells(path: Path) -> dict[str, str]:
    """The code cells of a notebook file, by cell id."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return {
        cell["id"]: "".join(cell["source"]).strip() for cell in cells if cell["cell_type"] == "code"
    }


def check(notebook: Path, copy: Path) -> CopyCheck:
    """Compare ``notebook``'s code cells with those of its HTML ``copy``."""
    now = notebook_code_cells(notebook)
    ran = copy_code_cells(copy.read_text(encoding="utf-8"))
    return CopyCheck(
        notebook=notebook.stem,
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
                f"  {notebook.stem:20s} {len(result.same):3d} of {total:3d} code cells the same: "
                f"{_verdict(result)}"
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
