"""A real ``jupyter server`` process: options from its command line, a clean stop on SIGTERM."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from tests.helpers import free_port, start_server, stop_server, wait_until_up

TOKEN = "jupyter-gpu-test"


def test_command_line_options_and_a_clean_shutdown(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    base = f"http://127.0.0.1:{port}/jh/user/"
    server = start_server(
        port=port,
        root=tmp_path,
        token=TOKEN,
        log=log,
        options=[
            "--ServerApp.base_url=/jh/user/",
            "--JupyterGpu.backend=simulated",
            "--JupyterGpu.simulated_devices=4",
            "--JupyterGpu.interval_s=0.2",
        ],
    )
    request = urllib.request.Request(
        base + "jupyter-gpu/api/v1/snapshot", headers={"Authorization": f"token {TOKEN}"}
    )

    def snapshot() -> Any:
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read())

    try:
        sample = wait_until_up(snapshot, server, log, timeout_s=30, poll_s=0.2)
        assert sample["backend"] == "simulated"
        assert len(sample["devices"]) == 4
    finally:
        code = stop_server(server, timeout_s=20)
    output = log.read_text()
    assert code == 0, output
    assert "Traceback" not in output
    assert "jupyter_gpu: sampling every 0.2 s (backend simulated" in output
