"""On a real GPU: kernel attribution inside a container's pid namespace.

A Jupyter server runs under ``unshare --pid --fork --mount-proc`` (its own pid namespace and
``/proc``, as in a container without ``hostPID``); a kernel of it allocates CUDA memory. The
check asserts that the snapshot attributes that memory to the kernel and its notebook, by the
pid NVML reports inside the namespace (driver 580 reported namespace pids), and records the
kernel's pid on the host beside it. Meanwhile a CUDA job runs outside the namespace: whatever
NVML lists of it inside must show as a row that says why it is not attributable (or NVML hides
it altogether: recorded), never as this user's process and never as a pid.

    python3 -m pytest -m gpu tests/gpu/test_pid_namespace_gpu.py -x -q

Writes ``pid_namespace_gpu.json`` and the server's log to ``$JUPYTER_GPU_OUT`` (or ``$OUT``).
Needs root (or unprivileged user namespaces) for ``unshare``; skipped where it cannot run.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from benchmarks.outputs import out_dir
from tests.helpers import FAST_SAMPLING, fetch_json, running_server, wait_for

pytestmark = pytest.mark.gpu

TOKEN = "jupyter-gpu-pidns-test"
UNSHARE = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child=SIGTERM"]
HOST_JOB = """
import sys, time, torch
x = torch.empty(512, 1024, 1024, dtype=torch.uint8, device="cuda")  # 512 MiB
torch.cuda.synchronize()
print("ready", flush=True)
time.sleep(float(sys.argv[1]))
"""
KERNEL_CODE = (
    "import os, torch; x = torch.ones(256, 1024, 1024, device='cuda'); torch.cuda.synchronize(); "
    "print(os.getpid())"
)


http_json = functools.partial(fetch_json, token=TOKEN)


def unshare_works() -> str | None:
    """Why ``unshare --pid`` cannot run here, or ``None`` when it can."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    probe = subprocess.run(
        [*UNSHARE[:4], "sh", "-c", "echo $$"], capture_output=True, text=True, timeout=30
    )
    if probe.returncode != 0 or probe.stdout.strip() != "1":
        return f"unshare --pid fails here: {probe.stderr.strip() or probe.stdout.strip()}"
    return None


def nspids(host_pid: int) -> list[int]:
    """The ``NSpid`` line of a host pid: its pid in each nested namespace, outermost first."""
    for line in Path(f"/proc/{host_pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return [int(x) for x in line.split()[1:]]
    return [host_pid]


def host_pid_of_kernel(kernel_id: str) -> int:
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if f"kernel-{kernel_id}.json" in cmdline:
            return int(proc.info["pid"])
    raise AssertionError(f"no host process runs kernel {kernel_id}")


@contextlib.contextmanager
def host_cuda_job(seconds: float) -> Iterator[subprocess.Popen[str]]:
    """A CUDA job outside the namespace, holding 512 MiB until the block ends."""
    job = subprocess.Popen(
        [sys.executable, "-c", HOST_JOB, str(seconds)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert job.stdout is not None
        if not any(line.strip() == "ready" for line in job.stdout):
            raise AssertionError("the host CUDA job did not start")
        yield job
    finally:
        job.terminate()
        job.wait(30)


def test_kernel_attribution_inside_a_pid_namespace(tmp_path: Path) -> None:
    why = unshare_works()
    if why:
        pytest.skip(why)
    out = out_dir() or tmp_path
    results: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:  # on the way out: the server, the job, the results
        stack.callback(
            lambda: (out / "pid_namespace_gpu.json").write_text(
                json.dumps(results, indent=2, default=str)
            )
        )
        host_job = stack.enter_context(host_cuda_job(600))
        server = stack.enter_context(
            running_server(
                tmp_path,
                token=TOKEN,
                log=out / "pid_namespace_server.log",
                options=["--JupyterGpu.backend=nvml", *FAST_SAMPLING],
                prefix=UNSHARE,  # it passes the stop's SIGTERM on (--kill-child=SIGTERM)
                timeout_s=90,
                stop_timeout_s=60,
            )
        )
        base, devices = server.origin, server.first_answer
        assert devices["backend"] == "nvml", devices
        kernel_id, kernel_client = server.kernel("in-container.ipynb")
        printed: list[str] = []
        reply = kernel_client.execute_interactive(
            KERNEL_CODE,
            timeout=240,
            output_hook=lambda m: printed.append(m["content"].get("text", "")),
        )
        assert reply["content"]["status"] == "ok", reply["content"]
        pid_inside = int("".join(printed).strip().splitlines()[-1])
        pid_on_host = host_pid_of_kernel(kernel_id)
        results["kernel_pid_inside_namespace"] = pid_inside
        results["kernel_pid_on_host"] = pid_on_host
        results["kernel_nspid_line"] = nspids(pid_on_host)
        assert nspids(pid_on_host)[-1] == pid_inside
        assert pid_on_host != pid_inside  # really another namespace

        # Wait until the row shows the whole allocation: the first snapshots that list the
        # kernel can predate it (one read 109 MB while another job shared the GPU).
        waited_from = time.monotonic()
        last: dict[str, Any] = {}

        def whole_row() -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
            snapshot = http_json(f"{base}/jupyter-gpu/api/v1/snapshot")
            last["rows"] = rows = [p for d in snapshot["devices"] for p in d["processes"]]
            mine = [p for p in rows if p["kernel_id"] == kernel_id]
            if mine and all(
                p["used_mem_bytes"] is None or p["used_mem_bytes"] >= 2**30 for p in mine
            ):
                return rows, mine
            return None

        rows, mine = wait_for(
            whole_row,
            lambda: (
                f"the kernel's row never showed its 1 GiB allocation within 60 s: {last['rows']}"
            ),
            timeout_s=60,
            poll_s=0.5,
        )
        results["row_complete_after_s"] = round(time.monotonic() - waited_from, 1)
        results["rows"] = rows
        (row,) = mine
        assert row["pid"] == pid_inside  # NVML reported the namespace's pid
        assert (row["scope"], row["notebook"]) == ("server", "in-container.ipynb")
        assert row["used_mem_bytes"] is None or row["used_mem_bytes"] >= 2**30

        # The job outside the namespace: never this user's, never a pid.
        host_job_pid = host_job.pid
        outsiders = [p for p in rows if p["kernel_id"] != kernel_id]
        for p in outsiders:
            assert p["scope"] in ("other", "unattributable"), p
            assert p["pid"] is None, p
        unattributable = [p for p in outsiders if p["scope"] == "unattributable"]
        results["host_job_pid"] = host_job_pid
        results["host_job_seen_inside_as"] = (
            "an unattributable row" if unattributable else "nothing (NVML hid it)"
        )
        for p in unattributable:
            assert "container" in p["reason"], p  # it says why
            assert p["used_mem_bytes"] is None or p["used_mem_bytes"] > 0
        metrics = urllib.request.urlopen(
            urllib.request.Request(
                f"{base}/jupyter-gpu/api/v1/metrics",
                headers={"Authorization": f"token {TOKEN}"},
            ),
            timeout=30,
        ).read()
        text = metrics.decode()
        assert 'notebook="in-container.ipynb"' in text
        results["kernel_series"] = [
            line for line in text.splitlines() if line.startswith("jupyter_gpu_kernel_memory")
        ]
    print(json.dumps(results, indent=2, default=str))
