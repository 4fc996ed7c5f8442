"""On a real GPU: GPM activity under a bf16 matmul against idle, and memory used vs nvidia-smi.

    python3 -m pytest -m gpu tests/gpu/test_gpm_memory_gpu.py -x -q

Writes ``gpm_memory_gpu.json`` to ``$JUPYTER_GPU_OUT`` when set. The load runs in a child
process (``CHILD``), so this process never creates a CUDA context; the GPU under load is found
by the child's pid in NVML's process list.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.outputs import write_json  # noqa: E402 (after the path set-up)
from jupyter_gpu.nvml.backend import NvmlBackend  # noqa: E402 (after the path set-up)
from jupyter_gpu.nvml.gpm import GPM_FIELDS  # noqa: E402 (as above)

pytestmark = pytest.mark.gpu

MIB = 1024 * 1024
RESULTS: dict[str, Any] = {}

# argv: mode ("matmul" or "hold"), seconds. "hold" allocates ~10 GiB and sleeps.
CHILD = """
import sys, time, torch
mode, seconds = sys.argv[1], float(sys.argv[2])
if mode == "hold":
    block = torch.empty(10 * 1024**3, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    print("ready", flush=True)
    time.sleep(seconds)
else:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    print("ready", flush=True)
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(20):
            c = a @ b
        torch.cuda.synchronize()
"""


def _write_results() -> None:
    write_json("gpm_memory_gpu.json", RESULTS)


@pytest.fixture(scope="module")
def backend() -> Iterator[NvmlBackend]:
    b = NvmlBackend()
    yield b
    b.close()
    _write_results()


def _child(mode: str, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, mode, str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "ready", f"the CUDA child did not start: {line!r}"
    return proc


def _device_of(backend: NvmlBackend, pid: int) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for d in backend.read():
            if any(p.pid == pid for p in d.processes):
                return d.index
        time.sleep(0.2)
    # NVML in another pid namespace may not list it: the first GPU is torch's default
    return 0


def _gpm_over(backend: NvmlBackend, index: int, seconds: float) -> dict[str, float | None]:
    backend.read_all("gpm")
    time.sleep(seconds)
    started = time.perf_counter()
    readings = backend.read_all("gpm")
    RESULTS.setdefault("gpm_read_s", []).append(time.perf_counter() - started)
    reading = readings.get(index)
    assert reading is not None, "GPM gave no reading for the GPU"
    RESULTS.setdefault("gpm_unavailable", {}).update(dict(reading.unavailable))
    if "sm_active_pct" in reading.unavailable or "tensor_active_pct" in reading.unavailable:
        pytest.skip(f"GPM not available on GPU {index}: {dict(reading.unavailable)}")
    return {f: reading.values.get(f) for f in GPM_FIELDS}


def test_gpm_under_bf16_matmul_is_clearly_above_idle(backend: NvmlBackend) -> None:
    proc = _child("matmul", 12.0)
    try:
        index = _device_of(backend, proc.pid)
        time.sleep(1.0)
        util = next(d.util_pct for d in backend.read() if d.index == index)
        busy = _gpm_over(backend, index, 3.0)
    finally:
        proc.wait(timeout=60)
    time.sleep(2.0)  # let the GPU settle
    idle = _gpm_over(backend, index, 3.0)
    RESULTS["gpm"] = {"gpu": index, "util_pct_busy": util, "busy": busy, "idle": idle}
    print(json.dumps(RESULTS["gpm"]))
    assert busy["sm_active_pct"] is not None
    assert busy["tensor_active_pct"] is not None
    assert idle["sm_active_pct"] is not None
    assert idle["tensor_active_pct"] is not None
    assert busy["sm_active_pct"] > 40.0
    assert busy["tensor_active_pct"] > 30.0
    assert busy["sm_active_pct"] > idle["sm_active_pct"] + 30.0
    assert busy["tensor_active_pct"] > idle["tensor_active_pct"] + 25.0
    assert idle["tensor_active_pct"] < 10.0
    # One GPM read (sample + metrics) per GPU costs well under a millisecond.
    per_gpu_s = min(RESULTS["gpm_read_s"]) / max(1, len(backend.info().devices))
    RESULTS["gpm_read_us_per_gpu"] = round(per_gpu_s * 1e6, 1)
    assert per_gpu_s < 0.005


def _smi_used_mib(index: int) -> float:
    out = subprocess.run(
        [
            shutil.which("nvidia-smi") or "nvidia-smi",
            "--query-gpu=memory.used",
            "--format=csv,noheader,nounits",
            "-i",
            str(index),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return float(out.stdout.strip().splitlines()[0])


def test_memory_used_within_one_percent_of_nvidia_smi(backend: NvmlBackend) -> None:
    if shutil.which("nvidia-smi") is None:
        pytest.skip("nvidia-smi is not on PATH")
    proc = _child("hold", 20.0)
    try:
        index = _device_of(backend, proc.pid)
        time.sleep(1.0)
        ours = next(d.mem_used_bytes for d in backend.read() if d.index == index)
        smi = _smi_used_mib(index)
        again = next(d.mem_used_bytes for d in backend.read() if d.index == index)
        import pynvml

        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        v1 = int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert ours is not None
    assert again is not None
    ours_mib = (ours + again) / 2 / MIB
    RESULTS["memory"] = {
        "gpu": index,
        "ours_v2_mib": round(ours_mib, 1),
        "nvidia_smi_mib": smi,
        "v1_mib": round(v1 / MIB, 1),
    }
    print(json.dumps(RESULTS["memory"]))
    assert smi > 10_000  # the child's 10 GiB is there
    assert abs(ours_mib - smi) <= 0.01 * smi
