"""A day of sampling in 72 minutes: does the server leak memory, threads or files, or log errors?

Starts a real ``jupyter server`` with the simulated backend sampling at 20 Hz (through
``soak_extension.py``: the traits stop at 10 Hz) and runs until it has taken ``--ticks`` samples
(86,400 by default: a day at 1 Hz). Meanwhile ``--clients`` WebSocket clients (20) connect to the
stream and leave at random: some close politely, some drop the TCP connection as a crashed tab
does, some stop reading for a while first (a stalled tab), then come back after a pause. A REST
client reads ``snapshot`` every second and ``history`` every 10 s, as an open panel does.

The server's RSS, threads and open files are read every ``--sample-every`` seconds. Twice, the
clients all leave for a moment so the server is measured quiet: once after warm-up (the history
ring buffer full: ``history_capacity`` ticks, plus a minute), and at the end. Pass/fail:

- RSS grew less than ``--max-rss-growth-mb`` (5 MB) between the two quiet measurements;
- no more threads or open file descriptors in the second than in the first (each the fewest of
  five readings over a second: a /proc file being read or a thread finishing is not a leak);
- no error or traceback in the server's log (``[E`` or ``Traceback``);
- every client got samples in order (``seq`` only goes up) and no REST request failed.

    nice python benchmarks/soak.py                       # the full run (about 72 minutes)
    python benchmarks/soak.py --ticks 300 --clients 5 --history-s 2   # a smoke run (CI)

Prints a JSON line per measurement and a summary JSON line last (``"soak": "passed"`` or
``"failed"``); exits 1 if a criterion failed. ``--json-out`` also writes the summary to a file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import re
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

TOKEN = "soak"
HEADERS = {"Authorization": f"token {TOKEN}"}
API = "/jupyter-gpu/api/v1"
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the tests' helpers, from a source tree

from tests.helpers import free_port, start_server, wait_for_async  # noqa: E402 (path set-up)

ERROR_LINE = re.compile(r"^\[E |Traceback \(most recent call last\)", re.MULTILINE)


@dataclass
class Counters:
    messages: int = 0
    connects: int = 0
    closes: dict[str, int] = field(default_factory=lambda: {"close": 0, "abort": 0, "stall": 0})
    out_of_order: int = 0
    rest_requests: int = 0
    rest_failures: list[str] = field(default_factory=list)
    latest_seq: int = 0


class Soak:
    def __init__(self, args: argparse.Namespace, port: int) -> None:
        self.args = args
        self.base = f"http://127.0.0.1:{port}"
        self.ws_url = f"ws://127.0.0.1:{port}{API}/stream"
        self.http = AsyncHTTPClient(max_clients=4)
        self.counters = Counters()
        self.go = asyncio.Event()  # set: clients may be connected; clear: all leave
        self.go.set()
        self.open: set[WebSocketClientConnection] = set()
        self.done = False

    async def get(self, path: str) -> Any:
        response = await self.http.fetch(self.base + path, headers=HEADERS, raise_error=False)
        self.counters.rest_requests += 1
        if response.code != 200:
            self.counters.rest_failures.append(f"{path}: {response.code}")
            return None
        return json.loads(response.body)

    async def client(self, k: int) -> None:
        try:
            await self._client(k)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # a client's own bug must show, not end it silently
            self.counters.rest_failures.append(f"client {k}: {err!r}")

    async def _client(self, k: int) -> None:
        rng = random.Random(self.args.seed * 1000 + k)
        while not self.done:
            await self.go.wait()
            request = HTTPRequest(self.ws_url, headers=HEADERS)
            try:
                ws = await websocket_connect(request, max_message_size=16 << 20)
            except Exception as err:
                self.counters.rest_failures.append(f"connect: {err}")
                await asyncio.sleep(1.0)
                continue
            self.counters.connects += 1
            self.open.add(ws)
            how = rng.choice(("close", "close", "abort", "stall"))
            stay = rng.uniform(0.2, self.args.max_stay_s)
            last_seq = 0
            end = time.monotonic() + stay
            try:
                while time.monotonic() < end and self.go.is_set() and not self.done:
                    try:
                        message = await asyncio.wait_for(ws.read_message(), 1.0)
                    except asyncio.TimeoutError:
                        continue
                    if message is None:
                        break
                    seq = json.loads(message)["sample"]["seq"]
                    if seq < last_seq:
                        self.counters.out_of_order += 1
                    last_seq = seq
                    self.counters.messages += 1
                    self.counters.latest_seq = max(self.counters.latest_seq, seq)
                if how == "stall" and self.go.is_set():
                    await asyncio.sleep(rng.uniform(1.0, 5.0))  # the server must not buffer
            finally:
                self.counters.closes[how] += 1
                if how == "abort":  # a crashed tab: the TCP connection drops, no close frame
                    stream = ws.protocol.stream if ws.protocol is not None else None
                    if stream is not None:
                        stream.close()
                ws.close()
                self.open.discard(ws)
            await asyncio.sleep(rng.uniform(0.0, self.args.max_pause_s))

    async def panel(self) -> None:
        last_ts = 0.0
        n = 0
        while not self.done:
            snapshot = await self.get(f"{API}/snapshot")
            if snapshot is not None:
                self.counters.latest_seq = max(self.counters.latest_seq, snapshot["seq"])
            n += 1
            if n % 10 == 0:
                history = await self.get(f"{API}/history?since={last_ts}")
                if history and history["samples"]:
                    last_ts = history["samples"][-1]["ts"]
            await asyncio.sleep(1.0)

    async def quiet(self) -> None:
        """Every client leaves; returns once the server has closed their sockets."""
        self.go.clear()
        while self.open:
            await asyncio.sleep(0.1)
        await asyncio.sleep(3.0)

    def resume(self) -> None:
        self.go.set()


def measure(proc: psutil.Process) -> dict[str, Any]:
    with proc.oneshot():
        return {
            "rss_mb": round(proc.memory_info().rss / 2**20, 2),
            "threads": proc.num_threads(),
            "fds": proc.num_fds(),
            "cpu_s": round(sum(proc.cpu_times()[:2]), 1),
        }


async def measure_quiet(proc: psutil.Process, readings: int = 5) -> dict[str, Any]:
    """``measure``, with the fewest threads and open files of ``readings`` 0.2 s apart.

    The sampler opens /proc files each tick and a finished thread takes a moment to go: one
    reading can catch either, more so on a loaded machine (the clean-clone CI's soak failed on its
    open files twice). A leak stays in every reading, so the fewest is the count.
    """
    points = [measure(proc)]
    for _ in range(readings - 1):
        await asyncio.sleep(0.2)
        points.append(measure(proc))
    return {
        **points[-1],
        "threads": min(p["threads"] for p in points),
        "fds": min(p["fds"] for p in points),
    }


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    root = tempfile.mkdtemp(prefix="jupyter-gpu-soak-")
    log_path = Path(args.log or Path(root) / "server.log")
    env = {
        **os.environ,
        "JUPYTER_GPU_SOAK_INTERVAL_S": str(1.0 / args.hz),
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    server = start_server(
        port=port,
        root=Path(root),
        token=TOKEN,
        log=log_path,
        options=[
            "--JupyterGpu.backend=simulated",
            f"--JupyterGpu.simulated_devices={args.devices}",
            f"--JupyterGpu.history_s={args.history_s}",
        ],
        env=env,
        extensions="{'jupyter_gpu': False, 'soak_extension': True}",
    )
    s = Soak(args, port)
    tasks: list[asyncio.Task[None]] = []
    try:
        devices = await wait_for_async(
            lambda: s.get(f"{API}/devices"),
            lambda: "the server did not answer:\n" + log_path.read_text(),
            timeout_s=60,
            poll_s=0.2,
            retry_on=(OSError,),
            process=server,
        )
        s.counters.rest_failures.clear()  # 503s while it started
        capacity = devices["config"]["history_capacity"]
        warmup = args.warmup_ticks if args.warmup_ticks is not None else capacity + 60 * args.hz
        if warmup >= args.ticks:
            raise SystemExit(f"--ticks {args.ticks} ends before the warm-up ({warmup} ticks)")
        proc = psutil.Process(server.pid)
        tasks = [asyncio.ensure_future(s.client(k)) for k in range(args.clients)]
        tasks.append(asyncio.ensure_future(s.panel()))
        start = time.monotonic()
        trend: list[dict[str, Any]] = []
        baseline: dict[str, Any] | None = None
        next_report = start
        while s.counters.latest_seq < args.ticks:
            if server.poll() is not None:
                raise RuntimeError("the server exited:\n" + log_path.read_text()[-4000:])
            if baseline is None and s.counters.latest_seq >= warmup:
                await s.quiet()
                baseline = {"ticks": s.counters.latest_seq, **await measure_quiet(proc)}
                print(json.dumps({"quiet_baseline": baseline}), flush=True)
                s.resume()
            if time.monotonic() >= next_report:
                point = {
                    "elapsed_s": round(time.monotonic() - start),
                    "ticks": s.counters.latest_seq,
                    "connected": len(s.open),
                    **measure(proc),
                }
                trend.append(point)
                print(json.dumps(point), flush=True)
                next_report += args.sample_every
            await asyncio.sleep(0.2)
        await s.quiet()
        end = {"ticks": s.counters.latest_seq, **await measure_quiet(proc)}
        # The sockets of clients that just left close on the server's loop a moment later: beside
        # the full test suite that took past the first reading (fds_flat failed once, one over).
        # A leak stays; a socket still closing does not, so wait up to 5 s for it to go.
        settle = time.monotonic() + 5
        while baseline is not None and end["fds"] > baseline["fds"] and time.monotonic() < settle:
            end = {"ticks": s.counters.latest_seq, **await measure_quiet(proc)}
        print(json.dumps({"quiet_end": end}), flush=True)
        elapsed = time.monotonic() - start
    finally:
        s.done = True
        s.go.set()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            code = -9
    log_text = log_path.read_text()
    errors = [m.group(0) for m in ERROR_LINE.finditer(log_text)]
    error_lines = [line for line in log_text.splitlines() if ERROR_LINE.search(line)]
    assert baseline is not None
    rss_growth = round(end["rss_mb"] - baseline["rss_mb"], 2)
    checks = {
        "rss_growth_mb_below": rss_growth < args.max_rss_growth_mb,
        # no more at the end than after warm-up: a leak only adds
        "threads_flat": end["threads"] <= baseline["threads"],
        "fds_flat": end["fds"] <= baseline["fds"],
        "no_error_logged": not errors,
        "samples_in_order": s.counters.out_of_order == 0,
        "no_request_failed": not s.counters.rest_failures,
        "server_exit_0": code == 0,
    }
    rss = [p["rss_mb"] for p in trend if baseline and p["ticks"] >= baseline["ticks"]]
    return {
        "soak": "passed" if all(checks.values()) else "failed",
        "checks": checks,
        "ticks": end["ticks"],
        "hz": args.hz,
        "elapsed_s": round(elapsed, 1),
        "achieved_hz": round(end["ticks"] / elapsed, 2),
        "clients": args.clients,
        "devices": args.devices,
        "history_capacity": capacity,
        "baseline": baseline,
        "end": end,
        "rss_growth_mb": rss_growth,
        "rss_after_warmup_min_max_mb": [min(rss), max(rss)] if rss else None,
        "threads_min_max": [min(p["threads"] for p in trend), max(p["threads"] for p in trend)],
        "fds_min_max": [min(p["fds"] for p in trend), max(p["fds"] for p in trend)],
        "server_cpu_pct_of_core": round((end["cpu_s"] - trend[0]["cpu_s"]) / elapsed * 100, 1),
        "ws_connects": s.counters.connects,
        "ws_closes": s.counters.closes,
        "ws_messages": s.counters.messages,
        "rest_requests": s.counters.rest_requests,
        "rest_failures": s.counters.rest_failures[:10],
        "errors_logged": error_lines[:10],
        "server_exit": code,
        "machine": f"{platform.node()}, {psutil.cpu_count()} CPUs",
        "python": platform.python_version(),
        "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
        "log": str(log_path),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--ticks", type=int, default=86_400, help="samples to take (86400)")
    ap.add_argument("--hz", type=float, default=20.0, help="sampling rate (20)")
    ap.add_argument("--clients", type=int, default=20, help="WebSocket clients (20)")
    ap.add_argument("--devices", type=int, default=2, help="simulated GPUs (2)")
    ap.add_argument("--history-s", type=float, default=600.0, help="JupyterGpu.history_s (600)")
    ap.add_argument(
        "--warmup-ticks", type=int, default=None, help="default: history capacity + 60 s of ticks"
    )
    ap.add_argument("--max-stay-s", type=float, default=20.0, help="longest client visit (20)")
    ap.add_argument("--max-pause-s", type=float, default=3.0, help="longest absence (3)")
    ap.add_argument("--sample-every", type=float, default=60.0, help="seconds between readings")
    ap.add_argument("--max-rss-growth-mb", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log", default=None, help="where the server's log goes (a temp dir)")
    ap.add_argument("--json-out", default=None, help="also write the summary here")
    args = ap.parse_args(argv)
    summary = asyncio.run(soak(args))
    text = json.dumps(summary)
    print(text, flush=True)
    if args.json_out:
        Path(args.json_out).write_text(text + "\n")
    return 0 if summary["soak"] == "passed" else 1


if __name__ == "__main__":
    sys.exit(main())
