"""On a real NVIDIA GPU: the nvml backend, its NVML call costs, and a real Jupyter server.

Runs under pytest (marker ``gpu``; skipped without CUDA) or as a script, which prints a JSON
summary and a short table and writes ``$OUT/nvml_server_gpu.json`` and the server's log:

    python tests/gpu/test_nvml_server_gpu.py

What it checks, with the real ``pynvml`` (no fake):

1. ``NvmlBackend`` reads the GPU: name, memory, utilization, power, temperature, clocks; and
   while a CUDA matmul loop runs in a child process, that child's pid is listed with memory.
2. The cost of each NVML call the tick makes (median microseconds), PCIe throughput (the slow
   read), and the sampler's tick time with and without the slow metrics.
3. A real ``jupyter server`` (a subprocess, the extension from this source tree) answers
   ``GET snapshot`` with backend ``nvml``; a kernel started through its REST API allocates CUDA
   memory, and the snapshot attributes that GPU process to the kernel and its notebook.
"""

from __future__ import annotations

import functools
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from benchmarks.outputs import out_dir, write_json  # noqa: E402 (after the path set-up)
from jupyter_gpu.nvml.backend import NvmlBackend  # noqa: E402 (as above)
from jupyter_gpu.sampling import Sampler, SamplerOptions  # noqa: E402 (after the path set-up)
from tests.helpers import (  # noqa: E402 (as above)
    FAST_SAMPLING,
    fetch_json,
    running_server,
    wait_for,
)

pytestmark = pytest.mark.gpu

TOKEN = "jupyter-gpu-gpu-test"
RESULTS: dict[str, Any] = {}
CUDA_JOB = """
import sys, time, torch
x = torch.randn(8192, 8192, device="cuda")
print("ready", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    y = x @ x
    torch.cuda.synchronize()
"""


# ---------------------------------------------------------------- helpers


def start_cuda_job(seconds: float = 120.0) -> subprocess.Popen[str]:
    """A child process that holds ~0.8 GB of GPU memory and keeps the GPU busy."""
    job = subprocess.Popen(
        [sys.executable, "-c", CUDA_JOB, str(seconds)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # warnings before "ready" are kept for the error message
        text=True,
    )
    assert job.stdout is not None
    seen = []
    for line in job.stdout:  # the job prints nothing after "ready", so the pipe never fills
        if line.strip() == "ready":
            return job
        seen.append(line)
    job.wait()
    raise RuntimeError("the CUDA job did not start:\n" + "".join(seen[-20:]))


def stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def median_us(fn: Callable[[], Any], n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1e6, 1)


http_json = functools.partial(fetch_json, token=TOKEN)


@pytest.fixture(scope="module")
def cuda_job() -> Iterator[subprocess.Popen[str]]:
    job = start_cuda_job()
    yield job
    stop(job)


# ---------------------------------------------------------------- 1. the backend


def check_backend_reads_the_gpu(job: subprocess.Popen[str]) -> None:
    backend = NvmlBackend()
    try:
        info = backend.info()
        time.sleep(0.5)  # let utilization reflect the running job
        devices = backend.read()
    finally:
        backend.close()
    RESULTS["driver_version"] = info.driver_version
    RESULTS["cuda_driver_version"] = info.cuda_driver_version
    RESULTS["devices"] = [
        {
            "index": d.index,
            "name": d.name,
            "state": d.state,
            "util_pct": d.util_pct,
            "mem_used_bytes": d.mem_used_bytes,
            "mem_total_bytes": d.mem_total_bytes,
            "power_w": d.power_w,
            "power_limit_w": d.power_limit_w,
            "temperature_c": d.temperature_c,
            "sm_clock_mhz": d.sm_clock_mhz,
            "unavailable": dict(d.unavailable),
            "processes": [[p.pid, p.used_mem_bytes] for p in d.processes],
        }
        for d in devices
    ]
    assert info.backend == "nvml"
    assert devices
    d0 = devices[0]
    assert d0.name
    assert "NVIDIA" in d0.name
    assert d0.state == "ok"
    assert d0.mem_total_bytes
    assert d0.mem_total_bytes > 10 * 2**30
    assert d0.mem_used_bytes
    assert d0.mem_used_bytes > 0
    assert d0.power_w is not None
    assert d0.power_w > 0
    assert d0.util_pct is not None
    assert d0.temperature_c is not None
    pids = {p.pid: p.used_mem_bytes for d in devices for p in d.processes}
    RESULTS["cuda_job_pid"] = job.pid
    RESULTS["cuda_job_listed"] = job.pid in pids
    assert job.pid in pids, (
        f"the CUDA job (pid {job.pid}) is not among NVML's processes {pids}: "
        "a container without the host's pid namespace reports other pids"
    )
    used = pids[job.pid]
    RESULTS["cuda_job_mem_bytes"] = used
    assert used is None or used > 256 * 2**20


def test_backend_reads_the_gpu_and_the_jobs_pid(cuda_job: subprocess.Popen[str]) -> None:
    check_backend_reads_the_gpu(cuda_job)


# ---------------------------------------------------------------- 2. costs


def measure_call_costs() -> None:
    import pynvml

    pynvml.nvmlInit()
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        calls: dict[str, Callable[[], Any]] = {
            "nvmlDeviceGetUtilizationRates": lambda: pynvml.nvmlDeviceGetUtilizationRates(h),
            "nvmlDeviceGetMemoryInfo": lambda: pynvml.nvmlDeviceGetMemoryInfo(h),
            "nvmlDeviceGetPowerUsage": lambda: pynvml.nvmlDeviceGetPowerUsage(h),
            "nvmlDeviceGetEnforcedPowerLimit": lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(h),
            "nvmlDeviceGetTemperature": lambda: pynvml.nvmlDeviceGetTemperature(
                h, pynvml.NVML_TEMPERATURE_GPU
            ),
            "nvmlDeviceGetClockInfo(SM)": lambda: pynvml.nvmlDeviceGetClockInfo(
                h, pynvml.NVML_CLOCK_SM
            ),
            "nvmlDeviceGetComputeRunningProcesses": lambda: (
                pynvml.nvmlDeviceGetComputeRunningProcesses(h)
            ),
            "nvmlDeviceGetGraphicsRunningProcesses": lambda: (
                pynvml.nvmlDeviceGetGraphicsRunningProcesses(h)
            ),
        }
        costs = {name: median_us(fn, 200) for name, fn in calls.items()}
        costs["nvmlDeviceGetPcieThroughput(TX) [slow]"] = median_us(
            lambda: pynvml.nvmlDeviceGetPcieThroughput(h, pynvml.NVML_PCIE_UTIL_TX_BYTES), 10
        )
    finally:
        pynvml.nvmlShutdown()
    RESULTS["nvml_call_us_median"] = costs
    start = time.perf_counter()
    backend = NvmlBackend()
    RESULTS["backend_open_ms"] = round((time.perf_counter() - start) * 1e3, 1)
    try:
        RESULTS["backend_read_all_devices_us_median"] = median_us(backend.read, 100)
        RESULTS["backend_read_slow_all_devices_ms_median"] = round(
            median_us(lambda: backend.read_all("pcie"), 5) / 1e3, 1
        )
        RESULTS["device_count"] = len(backend.info().devices)
    finally:
        backend.close()
    assert costs["nvmlDeviceGetUtilizationRates"] < 1000


def measure_tick(slow: bool, seconds: float = 3.0) -> dict[str, float]:
    """Median and max of the full sampler tick (reads, host, attribution, JSON) at 10 Hz."""
    durations: list[float] = []
    sampler = Sampler(
        SamplerOptions(backend="nvml", interval_s=0.1, slow_metrics=slow, slow_interval_s=1.0),
        encode=lambda s: json.dumps(s.to_dict()),
        on_sample=lambda _e: durations.append(sampler.last_tick_s or 0.0),
    )
    sampler.start()
    try:
        time.sleep(seconds)
    finally:
        sampler.stop()
    latest = sampler.latest()
    assert latest is not None, "the sampler produced no sample"
    assert latest.sample.backend == "nvml", (
        f"backend {latest.sample.backend}: {latest.sample.reason}"
    )
    if slow:
        assert latest.sample.devices[0].pcie_rx_bytes_per_s is not None
    # last_tick_s is set after on_sample: each value read is the previous tick's full duration
    ticks = durations[1:] or [0.0]
    return {
        "ticks": len(sampler.history),
        "tick_ms_median": round(statistics.median(ticks) * 1e3, 3),
        "tick_ms_max": round(max(ticks) * 1e3, 3),
    }


def test_nvml_call_costs_and_tick_time() -> None:
    measure_call_costs()
    RESULTS["tick_fast_only"] = measure_tick(slow=False)
    RESULTS["tick_with_slow_metrics"] = measure_tick(slow=True)
    # The slow reads run in their own thread: the tick must not absorb their ~21 ms per call.
    assert RESULTS["tick_with_slow_metrics"]["tick_ms_median"] < 15


# ---------------------------------------------------------------- 3. a real server


def check_server_snapshot(tmp: Path) -> None:
    log_path = (out_dir() or tmp) / "jupyter_server_gpu.log"
    with running_server(tmp, token=TOKEN, log=log_path, options=FAST_SAMPLING) as server:
        base, devices = server.origin, server.first_answer
        RESULTS["server_devices"] = {
            k: devices[k] for k in ("backend", "simulated", "reason", "driver_version")
        }
        assert devices["backend"] == "nvml", devices
        assert devices["devices"][0]["name"].startswith("NVIDIA")

        # A kernel of this server allocates CUDA memory: the snapshot must attribute it.
        kernel_id, kernel_client = server.kernel("gpu-check.ipynb")
        reply = kernel_client.execute_interactive(
            "import torch; x = torch.ones(256, 1024, 1024, device='cuda'); "
            "torch.cuda.synchronize()",
            timeout=180,
        )
        assert reply["content"]["status"] == "ok", reply["content"]
        last: dict[str, Any] = {}

        def attributed() -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
            last["snapshot"] = snapshot = http_json(f"{base}/jupyter-gpu/api/v1/snapshot")
            mine = [
                p
                for d in snapshot["devices"]
                for p in d["processes"]
                if p["kernel_id"] == kernel_id
            ]
            # The process list is sampled: a sample from before the 1 GiB tensor shows only the
            # new CUDA context (14 MiB in GPU run 22 of 2026-12-02), so wait for the tensor too.
            grown = [p for p in mine if p["used_mem_bytes"] is None or p["used_mem_bytes"] > 2**30]
            return (snapshot, grown) if grown else None

        snapshot, mine = wait_for(
            attributed,
            lambda: (
                "the kernel's GPU process was never attributed with its 1 GiB tensor; processes: "
                f"{[d['processes'] for d in last['snapshot']['devices']]}"
            ),
            timeout_s=30,
            poll_s=0.5,
        )
        RESULTS["server_snapshot_device0"] = {
            k: snapshot["devices"][0][k]
            for k in ("name", "util_pct", "mem_used_bytes", "power_w", "temperature_c")
        }
        RESULTS["kernel_process"] = mine[0]
        assert mine[0]["notebook"] == "gpu-check.ipynb"
        assert mine[0]["used_mem_bytes"] is None or mine[0]["used_mem_bytes"] > 2**30
        metrics = (
            urllib.request.urlopen(
                urllib.request.Request(
                    f"{base}/jupyter-gpu/api/v1/metrics",
                    headers={"Authorization": f"token {TOKEN}"},
                ),
                timeout=30,
            )
            .read()
            .decode()
        )
        assert "DCGM_FI_DEV_GPU_UTIL{" in metrics
    code = server.exit_code
    RESULTS["server_exit_code"] = code
    output = log_path.read_text()
    RESULTS["server_log_has_traceback"] = "Traceback" in output
    assert code == 0, output[-3000:]
    assert "Traceback" not in output, output[-3000:]


def test_jupyter_server_snapshot_on_the_gpu(tmp_path: Path) -> None:
    check_server_snapshot(tmp_path)


# ---------------------------------------------------------------- as a script


def print_table() -> None:
    print(json.dumps(RESULTS, indent=2, default=str))
    print()
    print("| check | result |")
    print("|---|---|")
    for d in RESULTS.get("devices", []):
        print(
            f"| GPU {d['index']} | {d['name']}, {d['util_pct']} % util, "
            f"{(d['mem_used_bytes'] or 0) / 2**30:.1f} / {(d['mem_total_bytes'] or 0) / 2**30:.1f}"
            f" GiB, {d['power_w']} W of {d['power_limit_w']} W, {d['temperature_c']} C, "
            f"{d['sm_clock_mhz']} MHz |"
        )
    if "cuda_job_listed" in RESULTS:
        print(
            f"| CUDA job pid {RESULTS['cuda_job_pid']} listed by NVML | "
            f"{RESULTS['cuda_job_listed']} ({RESULTS.get('cuda_job_mem_bytes')} bytes) |"
        )
    for name, us in RESULTS.get("nvml_call_us_median", {}).items():
        print(f"| {name} | {us} us |")
    for key in ("backend_read_all_devices_us_median", "backend_read_slow_all_devices_ms_median"):
        if key in RESULTS:
            print(f"| {key} | {RESULTS[key]} |")
    for key in ("tick_fast_only", "tick_with_slow_metrics"):
        if key in RESULTS:
            t = RESULTS[key]
            print(f"| {key} | median {t['tick_ms_median']} ms, max {t['tick_ms_max']} ms |")
    if "kernel_process" in RESULTS:
        print(f"| kernel attribution | {RESULTS['kernel_process']} |")
    if "server_exit_code" in RESULTS:
        print(
            f"| server stop | exit {RESULTS['server_exit_code']}, "
            f"traceback: {RESULTS['server_log_has_traceback']} |"
        )


def main() -> int:
    failures: list[str] = []

    def attempt(name: str, step: Callable[[], Any]) -> None:
        try:
            step()
        except Exception as err:  # noqa: BLE001 (a script: run and report every step)
            failures.append(f"{name}: {err!r}")

    job: subprocess.Popen[str] | None = None
    try:
        job = start_cuda_job()
    except Exception as err:  # noqa: BLE001 (report it; the other checks still run)
        failures.append(f"CUDA job: {err!r}")
    try:
        if job is not None:
            attempt("backend", lambda: check_backend_reads_the_gpu(job))
        attempt("call costs", measure_call_costs)
        attempt("tick (fast only)", lambda: RESULTS.update(tick_fast_only=measure_tick(False)))
        attempt("tick (slow on)", lambda: RESULTS.update(tick_with_slow_metrics=measure_tick(True)))
    finally:
        if job is not None:
            stop(job)
    with tempfile.TemporaryDirectory() as tmp:
        attempt("server", lambda: check_server_snapshot(Path(tmp)))
    RESULTS["failures"] = failures
    print_table()
    write_json("nvml_server_gpu.json", RESULTS)
    print("\nFAILED:\n- " + "\n- ".join(failures) if failures else "\nall GPU checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
