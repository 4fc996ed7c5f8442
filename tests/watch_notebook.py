"""Drive ``%gpu --watch`` in a real kernel (nbclient): shared by the CPU and the GPU tests.

The notebook starts a watch, runs a workload cell while the watch thread updates the widget, and
prints how many updates the view showed during that cell. ``run_watch_notebook`` returns those
figures and the widget state nbclient stored (the HTML the front end would show last).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

REPORT = "WATCH-REPORT "


def run_watch_notebook(
    workload: str,
    *,
    backend: str = "auto",
    interval_s: float = 0.2,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run the watch notebook around ``workload`` (Python source); the figures it printed."""
    cells = [
        "%load_ext jupyter_gpu",
        f"w = %gpu --watch --backend {backend} --interval {interval_s} -o",
        "import time\nt0 = time.time()\nwhile w.updates < 2 and time.time() - t0 < 20:\n"
        "    time.sleep(0.05)\nbefore = w.updates",
        workload + "\nafter = w.updates\n" + f"print({REPORT!r} + __import__('json').dumps("
        "{'before': before, 'after': after, 'max_util_pct': w.max_util_pct, "
        "'running': w.running, 'html': w.html.value}))",
        "%gpu --watch off",
        f"print({REPORT!r} + __import__('json').dumps("
        "{'stopped_because': w.stopped_because, 'running': w.running}))",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        client = NotebookClient(nb, timeout=300, kernel_name="python3", store_widget_state=True)
        client.execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    reports = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            text = out.get("text", "")
            for line in text.splitlines():
                if line.startswith(REPORT):
                    reports.append(json.loads(line[len(REPORT) :]))
    assert len(reports) == 2, f"the notebook printed {len(reports)} reports: {nb.cells}"
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    htmls = [
        m["state"].get("value", "")
        for m in state.get("state", {}).values()
        if m.get("model_name") == "HTMLModel"
    ]
    widget_views = [
        out
        for out in nb.cells[1].get("outputs", [])
        if "application/vnd.jupyter.widget-view+json" in out.get("data", {})
    ]
    return {
        **reports[0],
        "after_off": reports[1],
        "stored_html": htmls,
        "widget_views": len(widget_views),
        "path": str(Path.cwd()),
    }
