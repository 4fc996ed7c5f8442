"""A real ``jupyter server`` process: options from its command line, a clean stop on SIGTERM."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import running_server

TOKEN = "jupyter-gpu-test"


@pytest.mark.slow
def test_command_line_options_and_a_clean_shutdown(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with running_server(
        tmp_path,
        token=TOKEN,
        log=log,
        options=[
            "--ServerApp.base_url=/jh/user/",
            "--JupyterGpu.backend=simulated",
            "--JupyterGpu.simulated_devices=4",
            "--JupyterGpu.interval_s=0.2",
        ],
        ready="jh/user/jupyter-gpu/api/v1/snapshot",
        timeout_s=30,
        poll_s=0.2,
        stop_timeout_s=20,
    ) as server:
        sample = server.first_answer
        assert sample["backend"] == "simulated"
        assert len(sample["devices"]) == 4
    code = server.exit_code
    output = log.read_text()
    assert code == 0, output
    assert "Traceback" not in output
    assert "jupyter_gpu: sampling every 0.2 s (backend simulated" in output
