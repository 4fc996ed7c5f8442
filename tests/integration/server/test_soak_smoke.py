"""The soak benchmark (``benchmarks/soak.py``) in a few seconds: 300 ticks at 20 Hz, 5 clients.

The full run (86,400 ticks, 20 clients, 72 minutes) is in benchmarks/RESULTS.md; this one
checks the same criteria on a short run: no error logged, threads and open files flat once the
clients leave, samples in order on every socket, no request failed, a clean exit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parents[3] / "benchmarks" / "soak.py"


@pytest.mark.slow
def test_a_short_soak_passes(tmp_path: Path) -> None:
    out = tmp_path / "summary.json"
    argv = [
        sys.executable,
        str(SOAK),
        "--ticks=300",
        "--warmup-ticks=100",
        "--clients=5",
        "--history-s=2",
        "--max-stay-s=3",
        "--max-pause-s=1",
        "--sample-every=2",
        f"--log={tmp_path / 'server.log'}",
        f"--json-out={out}",
    ]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=240, check=False)
    assert out.exists(), run.stdout[-3000:] + run.stderr[-3000:]
    summary = json.loads(out.read_text())
    measured = {k: summary[k] for k in ("checks", "baseline", "end", "fds_min_max")}
    assert summary["checks"] == dict.fromkeys(summary["checks"], True), json.dumps(measured)
    assert run.returncode == 0
    assert summary["ws_connects"] > 5  # clients came and went
