"""A thousand stream clients that never read: the server's memory stays bounded, others keep up.

A real Jupyter server in a process of its own (its memory is measured alone, as RSS) streams 16
simulated GPUs every 0.1 s: about 130 KB of samples a second per client. One well-behaved
client counts what it gets; then a thousand clients open the stream and read nothing. The
server accepts ``max_stream_clients`` (64) of them, refuses the rest at once with a reason, and
drops each accepted one when its unsent data passes ``stream_send_budget_kib`` (512 KiB), so
what they can hold is about 64 x 512 KiB = 32 MiB. The bounds the test asserts:

- the server's RSS never grows more than ``MEMORY_BOUND_MIB`` over its baseline (measured on
  this machine: see the report the assertion prints);
- the counting client keeps up after the flood: every sample the server took in a window that
  opens once the last of the thousand has its answer reaches it, none skipped, half of them
  within ``MEDIAN_LAG_S`` of being taken and every one within ``MAX_LAG_S``, and the stream does
  not stall (at least half the cadence's samples: on two cores beside busy loops the sampler
  itself made 72 % of them, which is the sampler's pace, not the stream's). The window is on
  the server's clock, the time each sample was taken: a sample taken during the flood and sent
  as it ended is the flood's, not the steady stream's (one such came 1.16 s late on a busy CI
  run, when the window was on arrival);
- once the silent clients are gone, the RSS comes back to within ``RETURNED_MIB`` of the
  baseline.

Every wait is on a condition with a deadline; the rate is counted over a window of the
server's own clock, after the flood, so two busy cores only slow the flood down.
"""

from __future__ import annotations

import contextlib
import json
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.helpers import RunningServer, running_server, wait_for
from tests.integration.server.stream_clients import (
    FrameReader,
    read_headers,
    silent_socket,
    upgrade_request,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CLIENTS = 1000
LIMIT = 64  # the default max_stream_clients
INTERVAL_S = 0.1
WINDOW_S = 5.0
MEDIAN_LAG_S = 0.2
"""The median time from a sample being taken to its reaching the counting client: two ticks
(0.011 s on the CI machine at a load of 10 on two cores, 2026-12-07). A pause of 2.5 ms in each
socket's push (0.16 s a sample for 64 clients) did not fail it, nor the one-second bound before
it: the silent clients were dropped before the window opened, and the flood took 252 s instead
of 28. What the silent clients cost while they are connected, this test does not bound."""
MAX_LAG_S = 3.0
"""The longest any one sample may take: thirty ticks. On that same CI run one sample of 40
came 1.11 s late while the rest took 0.011-0.015 s: a process waiting for a core at a load of
10 on two, not the stream (a bound of one second failed there). A stream held behind the
silent clients stays held: the stall and the median checks catch that; this one catches a
hold that ends."""
MEMORY_BOUND_MIB = 64
"""The most the RSS may grow with the flood: 64 clients' budgets (512 KiB each, 32 MiB) and
the handshakes of 1,000 connections. Measured on the 2-vCPU development VM: +24 MiB (2026-12-03)
and +23.0-23.2 MiB (2026-12-05, two runs); the buffers share each sample's frame, so the silent
clients add little; the rest is the handshakes' high-water mark."""
RETURNED_MIB = 32
"""How close to the baseline the RSS must come back once the clients have gone. Python keeps
the high-water mark of the handshakes' objects (on the same VM, +21 MiB on 2026-12-03 and
+23.0 MiB ten seconds after the clients left on 2026-12-05; a second and a third flood of 1,000
added 0.3 MiB together): it is reused, not grown."""
TOKEN = "load-test-token-0123456789"


class Counter:
    """A stream client that reads every frame, on a thread: when each came, its seq, its lag."""

    def __init__(self, server: RunningServer, port: int) -> None:
        # (seq, when the server took it (its time.time()), seconds from then to here)
        self.got: list[tuple[int, float, float]] = []
        self.error: BaseException | None = None
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(upgrade_request("127.0.0.1", port, stream_path(), TOKEN))
        status, rest = read_headers(self.sock)
        assert status == 101
        self.frames = FrameReader(self.sock, rest)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while True:
                opcode, payload = self.frames.frame()
                if opcode == 8:
                    return
                if opcode != 1:  # a ping (answered), a pong
                    continue
                sample = json.loads(payload)["sample"]
                taken = float(sample["ts"])
                self.got.append((int(sample["seq"]), taken, time.time() - taken))
        except (OSError, ConnectionError) as err:
            self.error = err

    def past(self, ts: float) -> bool:
        """Whether a sample taken at or after ``ts`` (the server's time.time()) has come: the
        stream is in order, so the last one tells, and every one taken before it has come too,
        or never will."""
        return bool(self.got) and self.got[-1][1] >= ts

    def taken_between(self, start: float, end: float) -> tuple[list[int], list[float]]:
        """The seqs the server took from ``start`` to ``end`` (its time.time()), and their lags."""
        came = [(seq, lag_s) for seq, taken, lag_s in list(self.got) if start <= taken < end]
        return [seq for seq, _ in came], [lag_s for _, lag_s in came]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def stream_path() -> str:
    return "/jupyter-gpu/api/v1/stream"


def open_silent(port: int, opened: list[socket.socket]) -> int:
    sock = silent_socket()
    opened.append(sock)
    sock.connect(("127.0.0.1", port))
    sock.sendall(upgrade_request("127.0.0.1", port, stream_path(), TOKEN))
    status, _ = read_headers(sock)
    return status


def rss_mib(process: psutil.Process) -> float:
    return float(process.memory_info().rss) / 2**20


class Peak:
    """The highest RSS of a process, sampled every 50 ms on a thread until stopped."""

    def __init__(self, process: psutil.Process) -> None:
        self.process = process
        self.mib = rss_mib(process)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            with contextlib.suppress(psutil.Error):
                self.mib = max(self.mib, rss_mib(self.process))

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.mib


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningServer]:
    options = (
        "--JupyterGpu.backend=simulated",
        "--JupyterGpu.simulated_devices=16",
        f"--JupyterGpu.interval_s={INTERVAL_S}",
        "--JupyterGpu.cache_scan_interval_s=3600",
        "--JupyterGpu.history_s=10",  # full before the baseline: the RSS stands still then
    )
    with running_server(
        tmp_path, token=TOKEN, log=tmp_path / "server.log", options=options
    ) as running:
        yield running


def test_a_thousand_clients_that_never_read(server: RunningServer) -> None:
    port = int(server.origin.rsplit(":", 1)[1])
    process = psutil.Process(server.process.pid)
    counter = Counter(server, port)
    silent: list[socket.socket] = []
    try:
        # The history (10 s) full, the server's memory steady: the baseline.
        wait_for(
            lambda: len(counter.got) >= 150, "the counting client got no samples", timeout_s=60
        )
        baseline = rss_mib(process)
        peak = Peak(process)
        statuses = [open_silent(port, silent) for _ in range(CLIENTS)]
        assert statuses == [101] * CLIENTS  # every one upgraded (then kept, or closed at once)
        metrics = fetch_text(server)
        connected = gauge(metrics, "jupyter_gpu_stream_clients")
        assert connected <= LIMIT, f"{connected} stream clients were let in"
        # The counting client, over a window of samples taken after the flood: every one,
        # nothing skipped, none late. The window closes when a sample taken after it has come
        # (the stream is in order); one never sent would be a gap in the seqs, one sent late
        # carries its lag.
        start = time.time()
        wait_for(
            lambda: counter.past(start + WINDOW_S),
            "no sample taken after the window came",
            timeout_s=WINDOW_S + 30,
        )
        seqs, lags = counter.taken_between(start, start + WINDOW_S)
        expected = WINDOW_S / INTERVAL_S
        assert len(seqs) >= 0.5 * expected, (
            f"the stream stalled: {len(seqs)} samples in {WINDOW_S:g} s"
        )
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
        median_lag = statistics.median(lags)
        print(
            f"{len(seqs)} samples in the window, lag median {median_lag:.3f} s, "
            f"up to {max(lags):.3f} s"
        )
        assert median_lag < MEDIAN_LAG_S, f"samples came {median_lag:.2f} s late (the median)"
        assert max(lags) < MAX_LAG_S, f"a sample came {max(lags):.2f} s after it was taken"
        # The accepted silent clients pass their budget and are dropped.
        wait_for(
            lambda: gauge(fetch_text(server), "jupyter_gpu_stream_clients") == 1,
            "the silent clients were not dropped",
            timeout_s=120,
            poll_s=0.5,
        )
        high = peak.stop()
        report = f"baseline {baseline:.0f} MiB, peak {high:.0f} MiB (+{high - baseline:.0f})"
        print(report)
        assert high - baseline < MEMORY_BOUND_MIB, report
        for sock in silent:
            sock.close()
        silent.clear()
        # Their memory comes back.
        wait_for(
            lambda: rss_mib(process) - baseline < RETURNED_MIB,
            lambda: f"{report}; now {rss_mib(process):.0f} MiB",
            timeout_s=60,
            poll_s=0.5,
        )
        assert counter.error is None
    finally:
        for sock in silent:
            sock.close()
        counter.close()


def fetch_text(server: RunningServer) -> str:
    import urllib.request

    request = urllib.request.Request(
        server.api("metrics"), headers={"Authorization": f"token {TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        text: str = response.read().decode()
        return text


def gauge(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in the metrics")
