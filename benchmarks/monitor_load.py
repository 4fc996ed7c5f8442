"""Side by side: what browser tabs of a GPU monitor cost the Jupyter server they run in.

For each configuration, starts a real ``jupyter server`` with one monitor's server extension,
opens N browser-tab-like WebSocket clients on its endpoints (0, 1, 5, 20 tabs by default), and
for ``--seconds`` measures:

- how fast the server still answers Jupyter's own ``GET /api/status`` (p50/p99, one request
  every 50 ms: the event loop's responsiveness for everything else the server does: kernels,
  files, the notebook UI), and, for ours, our ``GET snapshot`` in the same loop, alternated with
  it (the order swapped every pass), so both routes see the same load ("our routes cost no
  more than Jupyter's own"): each pass's two requests are paired, and the table gives
  snapshot's latency over status's with its 95 % interval;
- the messages the tabs received per second, against what the monitor promises (ours: one
  sample per interval per tab; nvdashboard: one message per chart per refresh period);
- the server process's CPU, as % of one core.

Configurations (``--configs``, comma-separated):

- ``ours-1hz``, ``ours-10hz``: jupyter-gpu, one stream socket per tab (``--backend``: ``nvml``
  on a GPU machine, ``simulated`` elsewhere).
- ``nvdashboard``: jupyterlab-nvdashboard (0.15) at its 100 ms refresh, the five chart sockets
  of its default tab (``gpu_utilization``, ``gpu_usage``, ``gpu_resource``, ``pci_stats``,
  ``cpu_resource``), each told ``{"updateFrequency": 100, "isPaused": false}`` as its frontend
  does. Needs the ``jupyterlab_nvdashboard`` package and a GPU (it reads NVML itself).
- ``ours-10hz-hang``: ours at 10 Hz with the simulated backend, GPU 0's reads hung for the
  whole run (``hang:0``): compare its ``snapshot`` p99 with ``ours-10hz`` on ``simulated``.

    python benchmarks/monitor_load.py                                    # ours, simulated
    python benchmarks/monitor_load.py --backend nvml --configs ours-1hz,ours-10hz,nvdashboard
    python benchmarks/monitor_load.py --configs ours-10hz,ours-10hz-hang --tabs 5

Prints one JSON line per measurement and a Markdown table; ``--json-out`` writes them all. The
load generator runs on the same machine: on a small machine its own CPU slows the server's
answers, so latencies are upper bounds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' helpers, from a source tree

from jupyter_gpu.measure.interval import fmt_ratio, paired_ratio  # noqa: E402 (path set-up)
from tests.helpers import (  # noqa: E402 (path set-up)
    JUPYTER_GPU_ON,
    free_port,
    start_server,
    wait_for_async,
)

TOKEN = "monitor-load"
HEADERS = {"Authorization": f"token {TOKEN}"}
STATUS = "/api/status"
SNAPSHOT = "/jupyter-gpu/api/v1/snapshot"
NVDASHBOARD_CHARTS = ("gpu_utilization", "gpu_usage", "gpu_resource", "pci_stats", "cpu_resource")
POLL_S = 0.05
NVDASHBOARD_ON = "{'jupyterlab_nvdashboard': True, 'jupyter_gpu': False}"


@dataclass
class Config:
    label: str
    server_args: list[str]
    ws_paths: list[str]
    per_tab_per_s: float
    hello: str = ""
    routes: list[str] = field(default_factory=lambda: [STATUS])
    extensions: str = JUPYTER_GPU_ON  # the server's jpserver_extensions


def configs(backend: str, devices: int) -> dict[str, Config]:
    ours = [f"--JupyterGpu.backend={backend}", f"--JupyterGpu.simulated_devices={devices}"]
    stream = ["jupyter-gpu/api/v1/stream"]
    both = [STATUS, SNAPSHOT]
    sim = ["--JupyterGpu.backend=simulated", f"--JupyterGpu.simulated_devices={devices}"]
    period_ms = 100
    return {
        "ours-1hz": Config("ours 1 Hz", [*ours, "--JupyterGpu.interval_s=1"], stream, 1, "", both),
        "ours-10hz": Config(
            "ours 10 Hz", [*ours, "--JupyterGpu.interval_s=0.1"], stream, 10, "", both
        ),
        "ours-10hz-hang": Config(
            "ours 10 Hz, GPU 0 hung (simulated)",
            [
                *sim,
                "--JupyterGpu.interval_s=0.1",
                "--JupyterGpu.simulated_faults=hang:0",
                "--JupyterGpu.read_deadline_s=0.5",
            ],
            stream,
            10,
            "",
            both,
        ),
        "nvdashboard": Config(
            f"jupyterlab-nvdashboard {period_ms} ms",
            [],
            [f"nvdashboard/{chart}" for chart in NVDASHBOARD_CHARTS],
            len(NVDASHBOARD_CHARTS) * 1000 / period_ms,
            json.dumps({"updateFrequency": period_ms, "isPaused": False}),
            extensions=NVDASHBOARD_ON,
        ),
    }


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], 2)


async def wait_up(client: AsyncHTTPClient, base: str, server: subprocess.Popen[bytes]) -> None:
    await wait_for_async(
        lambda: client.fetch(base + STATUS, headers=HEADERS),
        "the server did not come up",
        timeout_s=60,
        poll_s=0.1,
        retry_on=(Exception,),  # refused, or an HTTP error while it starts
        process=server,
    )


async def measure(
    config: Config, tabs_list: list[int], seconds: float, log: Path
) -> list[dict[str, Any]]:
    port = free_port()
    root = tempfile.mkdtemp(prefix="monitor-load-")
    server = start_server(
        port=port,
        root=Path(root),
        token=TOKEN,
        log=log,
        options=config.server_args,
        extensions=config.extensions,
    )
    client = AsyncHTTPClient(max_clients=4)
    base = f"http://127.0.0.1:{port}"
    rows = []
    try:
        await wait_up(client, base, server)
        if SNAPSHOT in config.routes:  # the first sample (the backend opens in its thread)
            for _ in range(100):
                response = await client.fetch(base + SNAPSHOT, headers=HEADERS, raise_error=False)
                if response.code == 200:
                    break
                await asyncio.sleep(0.1)
        proc = psutil.Process(server.pid)
        for tabs in tabs_list:
            rows.append(await one_point(config, tabs, seconds, port, client, base, proc))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return rows


async def one_point(
    config: Config,
    tabs: int,
    seconds: float,
    port: int,
    client: AsyncHTTPClient,
    base: str,
    proc: psutil.Process,
) -> dict[str, Any]:
    sockets: list[WebSocketClientConnection] = []
    received = [0]
    for _ in range(tabs):
        for path in config.ws_paths:
            request = HTTPRequest(f"ws://127.0.0.1:{port}/{path}", headers=HEADERS)
            ws = await websocket_connect(request, max_message_size=64 << 20)
            if config.hello:
                await ws.write_message(config.hello)
            sockets.append(ws)

    async def drain(ws: WebSocketClientConnection) -> None:
        while await ws.read_message() is not None:
            received[0] += 1

    tasks = [asyncio.ensure_future(drain(ws)) for ws in sockets]
    await asyncio.sleep(3.0 if sockets else 1.0)  # settle: first messages, callbacks started
    received[0] = 0
    latency: dict[str, list[float]] = {route: [] for route in config.routes}
    cpu0 = proc.cpu_times()
    t0 = time.monotonic()
    k = 0
    last_snapshot = b""
    while time.monotonic() - t0 < seconds:
        # Alternate the routes, the order swapped every pass, so neither always goes first.
        n = len(config.routes)
        index = k % n if (k // n) % 2 == 0 else n - 1 - k % n
        route = config.routes[index]
        k += 1
        start = time.perf_counter()
        response = await client.fetch(base + route, headers=HEADERS)
        latency[route].append((time.perf_counter() - start) * 1e3)
        if route == SNAPSHOT:
            last_snapshot = response.body
        await asyncio.sleep(POLL_S)
    elapsed = time.monotonic() - t0
    cpu1 = proc.cpu_times()
    delivered = received[0] / elapsed
    for ws in sockets:
        ws.close()
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(BaseException):
            await task
    await asyncio.sleep(1.0)
    row: dict[str, Any] = {
        "config": config.label,
        "tabs": tabs,
        "sockets": len(sockets),
        "status_p50_ms": percentile(latency[STATUS], 0.5),
        "status_p99_ms": percentile(latency[STATUS], 0.99),
        "status_requests": len(latency[STATUS]),
        "delivered_per_s": round(delivered, 1),
        "promised_per_s": round(config.per_tab_per_s * tabs, 1),
        "server_cpu_pct_of_core": round(
            ((cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)) / elapsed * 100, 1
        ),
    }
    if last_snapshot:
        row["device_states"] = [d["state"] for d in json.loads(last_snapshot)["devices"]]
    if SNAPSHOT in latency:
        row["snapshot_p50_ms"] = percentile(latency[SNAPSHOT], 0.5)
        row["snapshot_p99_ms"] = percentile(latency[SNAPSHOT], 0.99)
        pairs = min(len(latency[SNAPSHOT]), len(latency[STATUS]))
        if pairs:
            # By the one rule: each pass's two requests paired, the ratio's 95 % interval.
            ratio = paired_ratio(latency[STATUS][:pairs], latency[SNAPSHOT][:pairs])
            row["snapshot_over_status"] = [
                round(1 / ratio.value, 3),
                round(1 / ratio.high, 3),
                round(1 / ratio.low, 3),
            ]
    return row


def table(rows: list[dict[str, Any]]) -> str:
    def ms(row: dict[str, Any], route: str) -> str:
        p50, p99 = row.get(f"{route}_p50_ms"), row.get(f"{route}_p99_ms")
        return "" if p50 is None else f"{p50} / {p99}"

    lines = [
        "| configuration | tabs | /api/status p50 / p99 ms | our snapshot p50 / p99 ms "
        "| snapshot / status, paired (interval) | delivered / promised per s "
        "| server CPU % of a core |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        paired = r.get("snapshot_over_status")
        ratio = (
            f"{fmt_ratio(paired[0])}x ({fmt_ratio(paired[1])}-{fmt_ratio(paired[2])}x)"
            if paired
            else ""
        )
        lines.append(
            f"| {r['config']} | {r['tabs']} | {ms(r, 'status')} | {ms(r, 'snapshot')} "
            f"| {ratio} | {r['delivered_per_s']} / {r['promised_per_s']} "
            f"| {r['server_cpu_pct_of_core']} |"
        )
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    known = configs(args.backend, args.devices)
    rows: list[dict[str, Any]] = []
    tabs = [int(t) for t in args.tabs.split(",")]
    for name in args.configs.split(","):
        config = known[name]
        log = Path(tempfile.gettempdir()) / f"monitor_load_{name}.log"
        rows += await measure(config, tabs, args.seconds, log)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--configs", default="ours-1hz,ours-10hz")
    ap.add_argument("--backend", default="simulated", choices=("simulated", "nvml"))
    ap.add_argument("--devices", type=int, default=8, help="simulated GPUs (8)")
    ap.add_argument("--tabs", default="0,1,5,20")
    ap.add_argument("--seconds", type=float, default=30.0, help="per measurement (30)")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args(argv)
    rows = asyncio.run(main_async(args))
    meta = {
        "machine": f"{platform.node()}, {psutil.cpu_count()} CPUs",
        "python": platform.python_version(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "backend": args.backend,
        "seconds": args.seconds,
    }
    print(json.dumps(meta))
    print(table(rows))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
