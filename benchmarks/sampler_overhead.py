"""Cost of the GPU monitor to the Jupyter server: CPU of the sampler + stream, snapshot latency.

Starts a real ``jupyter server`` with the simulated backend (8 devices by default), connects 20
WebSocket clients to the stream for 60 s, at 1 Hz and at 10 Hz, and prints:

- the server process's CPU time over that window as a % of one core (the sampler thread, the
  hand-off, and writing every sample to every client; plus whatever an idle server costs);
- whether every client got every sample;
- p50/p99 latency of ``GET snapshot`` with 50 requests in flight at once (20 rounds), measured
  while the 20 clients stay connected, beside Jupyter Server's own ``GET /api/status`` under the
  same load (what any handler costs there), and both one request at a time.

Targets: under 1 % of a core at 1 Hz, under 5 % at 10 Hz, p99 under 20 ms. The load generator
runs on the same machine (and in one Python process), so on a small machine its own CPU use can
slow the server's answers: the figures are an upper bound.

    python benchmarks/sampler_overhead.py                 # the full run (about 2.5 minutes)
    python benchmarks/sampler_overhead.py --seconds 10    # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

TOKEN = "sampler-overhead"
HEADERS = {"Authorization": f"token {TOKEN}"}
TARGETS = {1.0: 1.0, 10.0: 5.0}  # Hz -> max % of one core
P99_TARGET_MS = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_server(port: int, hz: float, devices: int, root: str) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "jupyter_server",
        "--no-browser",
        "--allow-root",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.root_dir={root}",
        f"--IdentityProvider.token={TOKEN}",
        "--ServerApp.jpserver_extensions={'jupyter_gpu': True}",
        "--JupyterGpu.backend=simulated",
        f"--JupyterGpu.simulated_devices={devices}",
        f"--JupyterGpu.interval_s={1.0 / hz}",
    ]
    log = Path(tempfile.gettempdir()) / f"sampler_overhead_{hz:g}hz.log"
    return subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT)


async def wait_ready(client: AsyncHTTPClient, base: str) -> None:
    for _ in range(300):
        try:
            await client.fetch(f"{base}/jupyter-gpu/api/v1/snapshot", headers=HEADERS)
            return
        except (HTTPClientError, OSError):
            await asyncio.sleep(0.1)
    raise RuntimeError("the server did not come up")


async def drain(ws: WebSocketClientConnection, seqs: list[int]) -> None:
    while True:
        message = await ws.read_message()
        if message is None:
            return
        seqs.append(json.loads(message)["sample"]["seq"])


async def latencies(
    client: AsyncHTTPClient, base: str, concurrency: int, rounds: int
) -> dict[str, list[float]]:
    """Latency (ms) of GET snapshot and, as a reference, of Jupyter's own GET /api/status.

    Rounds of ``concurrency`` requests at once alternate between the two routes, so both see
    the same machine load.
    """
    urls = {
        "snapshot": f"{base}/jupyter-gpu/api/v1/snapshot",
        "status": f"{base}/api/status",
    }

    async def one(url: str) -> float:
        start = time.perf_counter()
        await client.fetch(url, headers=HEADERS)
        return (time.perf_counter() - start) * 1e3

    for url in urls.values():  # warm up: first connections, first requests of each handler
        await asyncio.gather(*(one(url) for _ in range(concurrency)))
    out: dict[str, list[float]] = {name: [] for name in urls}
    for _ in range(rounds):
        for name, url in urls.items():
            out[name] += await asyncio.gather(*(one(url) for _ in range(concurrency)))
    return {name: sorted(values) for name, values in out.items()}


def percentile(values: list[float], q: float) -> float:
    return round(values[min(len(values) - 1, int(len(values) * q))], 2)


async def measure(hz: float, args: argparse.Namespace) -> dict[str, object]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as root:
        server = start_server(port, hz, args.devices, root)
        client = AsyncHTTPClient(max_clients=args.concurrency + 10)
        try:
            await wait_ready(client, base)
            proc = psutil.Process(server.pid)
            # idle: the sampler alone, nobody connected
            await asyncio.sleep(2)
            c0, t0 = proc.cpu_times(), time.monotonic()
            await asyncio.sleep(args.idle_seconds)
            c1, t1 = proc.cpu_times(), time.monotonic()
            idle_pct = (c1.user + c1.system - c0.user - c0.system) / (t1 - t0) * 100

            sockets = []
            for _ in range(args.clients):
                request = HTTPRequest(
                    f"ws://127.0.0.1:{port}/jupyter-gpu/api/v1/stream", headers=HEADERS
                )
                sockets.append(await websocket_connect(request))
            seqs: list[list[int]] = [[] for _ in sockets]
            pairs = zip(sockets, seqs, strict=True)
            tasks = [asyncio.ensure_future(drain(ws, s)) for ws, s in pairs]
            await asyncio.sleep(2)  # settle
            for s in seqs:
                s.clear()
            c0, t0 = proc.cpu_times(), time.monotonic()
            await asyncio.sleep(args.seconds)
            c1, t1 = proc.cpu_times(), time.monotonic()
            loaded_pct = (c1.user + c1.system - c0.user - c0.system) / (t1 - t0) * 100
            # every client should have seen every tick of the window, in order
            complete = all(s and s == list(range(s[0], s[-1] + 1)) for s in seqs)
            per_client = statistics.median(len(s) for s in seqs) / (t1 - t0)

            lat = await latencies(client, base, args.concurrency, args.rounds)
            sequential = await latencies(client, base, 1, 200)
            for ws in sockets:
                ws.close()
            for task in tasks:
                task.cancel()
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(20)
            except subprocess.TimeoutExpired:
                server.kill()
            client.close()
    return {
        "hz": hz,
        "devices": args.devices,
        "clients": args.clients,
        "seconds": args.seconds,
        "server_cpu_pct_of_core_idle": round(idle_pct, 2),
        "server_cpu_pct_of_core": round(loaded_pct, 2),
        "samples_per_s_per_client": round(per_client, 2),
        "every_client_got_every_sample": complete,
        "snapshot_requests": len(lat["snapshot"]),
        "snapshot_concurrency": args.concurrency,
        "snapshot_p50_ms": percentile(lat["snapshot"], 0.5),
        "snapshot_p99_ms": percentile(lat["snapshot"], 0.99),
        "api_status_p50_ms": percentile(lat["status"], 0.5),
        "api_status_p99_ms": percentile(lat["status"], 0.99),
        "snapshot_sequential_p50_ms": percentile(sequential["snapshot"], 0.5),
        "api_status_sequential_p50_ms": percentile(sequential["status"], 0.5),
        "target_cpu_pct": TARGETS.get(hz),
        "target_p99_ms": P99_TARGET_MS,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hz", default="1,10", help="sampling rates to measure (comma-separated)")
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    cpu = platform.processor() or platform.machine()
    print(
        f"# {time.strftime('%Y-%m-%d')} {platform.node()}: {psutil.cpu_count()} CPUs ({cpu}), "
        f"Python {platform.python_version()}, pid {os.getpid()}",
        flush=True,
    )
    rows = []
    for hz in (float(h) for h in args.hz.split(",")):
        row = asyncio.run(measure(hz, args))
        print(json.dumps(row), flush=True)
        rows.append(row)
    print()
    print("| rate | clients | server CPU, % of a core (idle) | every sample to every client |")
    print("|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['hz']:g} Hz | {r['clients']} | {r['server_cpu_pct_of_core']} "
            f"({r['server_cpu_pct_of_core_idle']}); target < {r['target_cpu_pct']} | "
            f"{'yes' if r['every_client_got_every_sample'] else 'NO'} |"
        )
    print()
    print(
        f"| rate | GET snapshot p50 / p99, {args.concurrency} in flight | "
        "Jupyter's GET /api/status, same load | one at a time: snapshot / status |"
    )
    print("|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['hz']:g} Hz | {r['snapshot_p50_ms']} / {r['snapshot_p99_ms']} ms "
            f"(target p99 < {P99_TARGET_MS:g}) | {r['api_status_p50_ms']} / "
            f"{r['api_status_p99_ms']} ms | {r['snapshot_sequential_p50_ms']} / "
            f"{r['api_status_sequential_p50_ms']} ms |"
        )


if __name__ == "__main__":
    main()
