"""A real ``jupyter server`` process with this extension on, for the tests that need a whole one.

Used by the command-line test (``tests/integration/server``) and by the GPU check
(``tests/gpu/test_nvml_server_gpu.py``, also run as a script: it puts the repository root on
``sys.path`` first). The server listens on 127.0.0.1 only and needs its token.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_server(
    *,
    port: int,
    root: Path,
    token: str,
    log: Path,
    options: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """``python -m jupyter_server`` with ``jupyter_gpu`` on, its output (both streams) in ``log``.

    ``options`` are more command-line options (``--JupyterGpu.backend=simulated``, ...).
    """
    argv = [
        sys.executable,
        "-m",
        "jupyter_server",
        "--no-browser",
        "--allow-root",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.root_dir={root}",
        f"--IdentityProvider.token={token}",
        "--ServerApp.jpserver_extensions={'jupyter_gpu': True}",
        *options,
    ]
    with log.open("w") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)


def wait_until_up(
    fetch: Callable[[], T],
    server: subprocess.Popen[bytes],
    log: Path,
    *,
    timeout_s: float,
    poll_s: float,
) -> T:
    """``fetch()``'s result once it stops raising ``OSError`` (refused, or an HTTP error).

    Raises:
        AssertionError: with the server's log, if the server exits or ``timeout_s`` passes.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return fetch()
        except OSError:
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(poll_s)


def stop_server(server: subprocess.Popen[bytes], timeout_s: float) -> int:
    """SIGTERM, as a process manager stops it; the exit code (-9: killed after ``timeout_s``)."""
    server.send_signal(signal.SIGTERM)
    try:
        return server.wait(timeout_s)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
        return -9
