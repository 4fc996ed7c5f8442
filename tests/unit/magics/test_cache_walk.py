"""%compile's cache walk runs in a thread: a compiling cell waits for it a few ms at most."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from jupyter_gpu.magics.compile import magic
from jupyter_gpu.magics.compile.cache_walk import WAIT_S, CacheSizer
from jupyter_gpu.magics.compile.dynamo_watch import CompileReport
from tests.helpers import wait_for

ROOT = Path(__file__).resolve().parents[3]


def _report() -> CompileReport:
    return CompileReport(compile_time_s=0.1, wall_s=0.2, frames=1, graphs=1, graph_break_count=0)


class SlowScan:
    """A cache walk that takes ``seconds`` and finds ``sizes`` bytes, one per call."""

    def __init__(self, seconds: float, sizes: list[int]) -> None:
        self.seconds = seconds
        self.sizes = sizes
        self.calls = 0
        self.release = threading.Event()

    def __call__(self) -> int:
        self.calls += 1
        self.release.wait(self.seconds)
        return self.sizes[min(self.calls, len(self.sizes)) - 1]


def test_a_small_cache_is_measured_within_the_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    sizer = CacheSizer(SlowScan(0.0, [1000, 5000]))
    sizer.refresh().wait(5)
    monkeypatch.setattr(magic, "SIZER", sizer)
    report = _report()
    magic.measure_cache(report)
    assert report.cache_bytes_added == 4000
    assert not report.cache_pending


def test_a_slow_walk_leaves_the_cell_and_fills_the_report_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scan = SlowScan(0.0, [1000, 9000])
    sizer = CacheSizer(scan)
    sizer.refresh().wait(5)
    scan.seconds = 5.0  # the next walk is slow (a 100k-file cache)
    monkeypatch.setattr(magic, "SIZER", sizer)
    report = _report()
    start = time.perf_counter()
    magic.measure_cache(report)
    spent = time.perf_counter() - start
    assert spent < WAIT_S + 0.03  # the cell does not wait for the walk
    assert report.cache_pending
    assert report.cache_bytes_added is None
    scan.release.set()  # the walk ends
    wait_for(lambda: not report.cache_pending, "the walk never ended", timeout_s=5, poll_s=0.01)
    assert report.cache_bytes_added == 8000
    assert sizer.latest == 9000


def test_a_refresh_during_a_walk_walks_again_after_it() -> None:
    scan = SlowScan(5.0, [1, 2, 3])
    sizer = CacheSizer(scan)
    first = sizer.refresh()
    second = sizer.refresh()
    third = sizer.refresh()  # joins the queued walk: files may have come since the first began
    assert second is third
    scan.release.set()
    assert first.wait(5) == (True, 1)
    assert second.wait(5) == (True, 2)
    assert scan.calls == 2


@pytest.mark.slow
def test_the_benchmark_runs_at_smoke_size(tmp_path: Path) -> None:
    # benchmarks/compile_cache_walk.py at 300 files, so that it does not rot (RESULTS.md has
    # the 100,000-file figures).
    out = tmp_path / "walk.json"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "compile_cache_walk.py"),
            "--files",
            "300",
            "--cells",
            "2",
            "--json",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    figures = json.loads(out.read_text())
    assert figures["files"] == 300
    assert figures["reports_with_figure_after_walk"] == 2
    assert figures["cache_part_ms_max"] < 1000
