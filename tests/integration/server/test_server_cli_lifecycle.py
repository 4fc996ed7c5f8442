"""A real ``jupyter server`` process: options from its command line, a clean stop on SIGTERM."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

TOKEN = "jupyter-gpu-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_command_line_options_and_a_clean_shutdown(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    base = f"http://127.0.0.1:{port}/jh/user/"
    with log.open("w") as out:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter_server",
                "--no-browser",
                "--allow-root",
                f"--port={port}",
                "--ServerApp.ip=127.0.0.1",
                "--ServerApp.base_url=/jh/user/",
                f"--ServerApp.root_dir={tmp_path}",
                f"--IdentityProvider.token={TOKEN}",
                "--ServerApp.jpserver_extensions={'jupyter_gpu': True}",
                "--JupyterGpu.backend=simulated",
                "--JupyterGpu.simulated_devices=4",
                "--JupyterGpu.interval_s=0.2",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        request = urllib.request.Request(
            base + "jupyter-gpu/api/v1/snapshot", headers={"Authorization": f"token {TOKEN}"}
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    snapshot = json.loads(response.read())
                break
            except (urllib.error.URLError, ConnectionError):
                assert server.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        assert snapshot["backend"] == "simulated"
        assert len(snapshot["devices"]) == 4
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=20)
    output = log.read_text()
    assert code == 0, output
    assert "Traceback" not in output
    assert "jupyter_gpu: sampling every 0.2 s (backend simulated" in output
