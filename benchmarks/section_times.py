"""Compute time per notebook section, from executed notebooks' cell timings.

nbclient records when each cell started and finished (``metadata.execution``); this adds them
up per ``## `` section and prints a Markdown table, the measured part of docs/teaching.md:

    python benchmarks/section_times.py DIR_OF_EXECUTED_NOTEBOOKS [--json out.json]

A folder may hold the executed copies of one run (e.g. the ``executed/`` folder of
``tests/gpu/run_notebooks_gpu.py``'s archive).
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path
from typing import Any


def _seconds(cell: dict[str, Any]) -> float:
    timing = cell.get("metadata", {}).get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not start or not end:
        return 0.0
    parse = datetime.fromisoformat
    return (parse(end.replace("Z", "+00:00")) - parse(start.replace("Z", "+00:00"))).total_seconds()


def sections(path: Path) -> list[tuple[str, float]]:
    """``(section title, seconds)`` in order; cells before the first ``## `` count as setup."""
    nb = json.loads(path.read_text())
    rows: list[tuple[str, float]] = [("setup", 0.0)]
    for cell in nb["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown" and source.startswith("## "):
            rows.append((source.splitlines()[0][3:].strip(), 0.0))
        elif cell["cell_type"] == "code":
            title, seconds = rows[-1]
            rows[-1] = (title, seconds + _seconds(cell))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    table: dict[str, list[tuple[str, float]]] = {}
    for path in sorted(args.folder.glob("[0-9][0-9]-*.ipynb")):
        table[path.stem] = sections(path)
    for notebook, rows in table.items():
        total = sum(s for _, s in rows)
        print(f"\n{notebook}: {total:.0f} s of compute\n\n| section | seconds |\n|---|---:|")
        for title, seconds in rows:
            print(f"| {title} | {seconds:.0f} |")
    if args.json:
        args.json.write_text(json.dumps(table, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
