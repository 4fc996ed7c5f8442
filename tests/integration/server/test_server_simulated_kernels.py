"""A simulated server and its real kernels agree: ``%gpu`` in a kernel shows what the panel shows.

Two real kernels share one simulated GPU. The server's sampler lists them as the GPU's
processes (from its kernel manager) and splits the job's memory between them; each kernel's
``%gpu`` opens a simulated backend of its own, which must list the same kernels, at the same
point of the job (``JUPYTER_GPU_SIMULATED_EPOCH``), and so give the kernel the memory the
server's samples give it over the same moments.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from jupyter_server.serverapp import ServerApp
from traitlets.config import Config

from jupyter_gpu.magics.output.render import fmt_bytes
from tests.helpers import wait_for_async
from tests.integration.server.api_helpers import gpu_config

Fetch = Callable[..., Awaitable[Any]]
Get = Callable[..., Awaitable[Any]]
REPORT = "SIMULATED-REPORT "
CELL = (
    "%load_ext jupyter_gpu\n"
    "import json, os, time\n"
    "t0 = time.time()\n"
    "s = %gpu -o\n"
    "t1 = time.time()\n"
    "rows = [[d.index, p.pid, p.used_mem_bytes] for d in s.devices for p in d.processes]\n"
    f"print({REPORT!r} + json.dumps("
    "{'pid': os.getpid(), 't0': t0, 't1': t1, 'simulated': s.simulated, 'rows': rows}))"
)


@pytest.fixture
def jp_server_config() -> Config:
    return gpu_config(simulated_devices=1)


async def _start_kernel(jp_fetch: Fetch) -> str:
    response = await jp_fetch("api", "kernels", method="POST", body=json.dumps({"name": "python3"}))
    kernel_id: str = json.loads(response.body)["id"]
    return kernel_id


async def _run(jp_serverapp: ServerApp, kernel_id: str, code: str) -> str:
    """Run ``code`` in the server's kernel; its stdout and every display's text/plain."""
    client = jp_serverapp.kernel_manager.get_kernel(kernel_id).client()
    client.start_channels()
    texts: list[str] = []

    def keep(message: dict[str, Any]) -> None:
        content = message["content"]
        texts.append(content.get("text", ""))
        texts.append(content.get("data", {}).get("text/plain", ""))
        if message["msg_type"] == "error":
            texts.append("\n".join(content["traceback"]))

    try:
        await client.wait_for_ready(timeout=120)
        await client.execute_interactive(code, timeout=120, output_hook=keep)
    finally:
        client.stop_channels()
    return "\n".join(texts)


async def _wait_for_processes(api_get: Get, count: int) -> None:
    last: dict[str, Any] = {}

    async def listed() -> bool:
        last["sample"] = sample = await api_get("snapshot")
        kernels = [p for p in sample["devices"][0]["processes"] if p["kernel_id"]]
        return len(kernels) == count

    await wait_for_async(
        listed,
        lambda: f"the simulated GPU never listed {count} kernels: {last['sample']}",
        timeout_s=20,
        poll_s=0.1,
    )


async def test_gpu_in_a_kernel_shows_the_memory_the_server_gives_it(
    jp_fetch: Fetch, api_get: Get, jp_serverapp: ServerApp
) -> None:
    kernels = [await _start_kernel(jp_fetch), await _start_kernel(jp_fetch)]
    try:
        await _wait_for_processes(api_get, 2)
        output = await _run(jp_serverapp, kernels[0], CELL)
        reports = [line for line in output.splitlines() if line.startswith(REPORT)]
        assert reports, output
        report = json.loads(reports[0][len(REPORT) :])
        assert report["simulated"] is True
        pids = sorted(row[1] for row in report["rows"])
        assert report["pid"] in pids
        assert len(pids) == 2  # the other kernel too: the job's memory is split between them
        (held,) = [row[2] for row in report["rows"] if row[1] == report["pid"]]

        # The server's samples of this kernel's process over the moments %gpu read.
        history = await api_get("history", since=repr(report["t0"] - 0.3))
        seen = [
            p["used_mem_bytes"]
            for s in history["samples"]
            if s["ts"] <= report["t1"] + 0.3
            for p in s["devices"][0]["processes"]
            if p["pid"] == report["pid"]
        ]
        assert seen, history
        slack = 2**29  # half a GiB: the job's memory ramps by up to 4 GiB/s per process
        assert min(seen) - slack <= held <= max(seen) + slack, (held, seen)
        assert f"this kernel: {fmt_bytes(held)} simulated (made up by the demo backend" in output
    finally:
        for kernel_id in kernels:
            await jp_fetch("api", "kernels", kernel_id, method="DELETE")
