"""A pytest plugin for the GPU sessions: append each failure to a file the moment it happens.

    python3 -m pytest -p tests.gpu.failure_log ...   # with JUPYTER_GPU_FAILURES=path

A run cut short by its time limit keeps the failures so far, with their tracebacks, even when
pytest never reaches its summary. Under xdist the controller receives every worker's reports,
so one process writes the file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = os.environ.get("JUPYTER_GPU_FAILURES")
    # An xdist worker sees its own reports too; only the controller writes.
    if not path or not report.failed or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    with Path(path).open("a", encoding="utf-8") as out:
        out.write(f"FAILED {report.nodeid} ({report.when})\n{report.longreprtext[-4000:]}\n\n")
