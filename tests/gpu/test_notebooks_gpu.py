"""Every tutorial notebook at full size, and at the 16 GB and 24 GB tiers emulated, on a GPU.

    python3 -m pytest -m gpu tests/gpu/test_notebooks_gpu.py -x -q

Each case runs ``tests/gpu/run_notebooks_gpu.py`` (nbclient, a cold torch.compile cache) and
asserts: no error cell (an exercise's expected "not solved" aside), no out-of-memory error, every
target met at full size. The tiers cap torch's allocator with
``torch.cuda.set_per_process_memory_fraction`` (``JUPYTER_GPU_TIER``), the 16 GB tier also takes
the no-bf16 path (fp16 + GradScaler), so one H200 proves the sizes of a T4 and an L4. Figures,
executed notebooks and a RESULTS.md section per case go to ``$JUPYTER_GPU_OUT`` (or a temporary
folder): ``notebooks-<case>.json`` (the summary), ``notebooks-executed-<tier>.tar.gz``,
``RESULTS-<case>.md``. ``JUPYTER_GPU_NOTEBOOKS=01,03`` runs only those notebooks.

The full-size case runs 00-04, 06 and 07 (05 has its own GPU test, on two GPUs); the 16 GB tier
00-04 and 07, the 24 GB tier 00-04: notebook 06 compiles a small MLP in child processes that use
well under 1 GiB, so a tier changes nothing in it. Notebook 07's own target is under 10 minutes,
the device tool's limit for one command: run it on its own (``JUPYTER_GPU_NOTEBOOKS=07``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.outputs import out_dir

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "tests" / "gpu" / "run_notebooks_gpu.py"
NOTEBOOKS = {"full": "00,01,02,03,04,06,07", "16gb": "00,01,02,03,04,07", "24gb": "00,01,02,03,04"}


@pytest.mark.gpu
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("case", ["full", "16gb", "24gb"])
def test_notebooks_at_tier(case: str, tmp_path: Path) -> None:
    out = out_dir() or tmp_path
    summary_path = out / f"notebooks-{case}.json"
    command = [sys.executable, str(RUNNER), "--out", str(out), "--summary", str(summary_path)]
    if case != "full":
        command += ["--tier", case]
    command += ["--only", os.environ.get("JUPYTER_GPU_NOTEBOOKS") or NOTEBOOKS[case]]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    (out / f"notebooks-{case}.log").write_text(done.stdout + "\n" + done.stderr)
    print(done.stdout[-6000:])
    summary = json.loads(summary_path.read_text())
    failed = [
        f"{n['notebook']}: {n['failure'] or n['errors']}"
        for n in summary["notebooks"]
        if n["failure"] or n["errors"]
    ]
    assert not failed, f"notebooks failed at {case}: {failed}"
    assert not [n["notebook"] for n in summary["notebooks"] if n["oom"]], "out of memory"
    for run in summary["figures"]:  # tier: the plan's as_dict(), with tf32 since issue 21
        tier = run.get("tier") or {}
        if case == "full":
            assert not tier.get("emulated")
        else:
            assert tier.get("tier") == case, tier
            assert tier.get("emulated"), tier
            assert tier.get("bf16") is (case != "16gb"), "16gb emulates a GPU without bf16"
        figures = {f["key"]: f["value"] for f in run["figures"]}
        if run["notebook"] == "07-capstone":
            assert {"start_tflops", "shape_tflops", "script_tflops"} <= figures.keys(), "07 climbed"
        if run["notebook"] == "03-gpu-memory":
            leftover = figures["leftover_mib"]
            assert abs(leftover) < 64, "03: memory back at its static level before the OOM demo"
            for key in ("fresh_default_unusable_gib", "fresh_expandable_unusable_gib"):
                assert key in figures, f"03: the fresh-process figure {key} (RESULTS.md quotes it)"
        if run["notebook"] == "02-mixed-precision":
            tf32 = bool(figures["tf32_tensor_cores"])
            assert tf32 is bool(tier.get("tf32")), "02 says what the plan says about TF32"
            assert ("tf32_speedup" in figures) is tf32, "no tf32 speedup without TF32 cores"
    missed = [
        f"{run['notebook']}: {c['label']} {c['value']:.3g} < {c['target']}"
        for run in summary["figures"]
        for c in run["checks"]
        if c["met"] is False
    ]
    assert not missed, f"targets missed: {missed}"
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
