"""``tests.helpers.notebook_kernel`` gives a ready client even when the kernel is slow to start.

The GPU checks start kernels through it while the test suite loads every core; a kernel then
takes seconds before its heartbeat answers. Here the server's ``python3`` kernel waits 3 s
before it starts (a kernelspec of the same name earlier on ``JUPYTER_PATH``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.helpers import (
    fetch_json,
    free_port,
    notebook_kernel,
    start_server,
    stop_server,
    wait_until_up,
)

TOKEN = "slow-kernel-check"
SLOW_LAUNCH = (
    "import runpy, sys, time; time.sleep(3); "
    "sys.argv = ['ipykernel_launcher', '-f', sys.argv[1]]; "
    "runpy.run_module('ipykernel_launcher', run_name='__main__')"
)


def test_a_kernel_slow_to_start_still_gives_a_ready_client(tmp_path: Path) -> None:
    spec = tmp_path / "data" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-c", SLOW_LAUNCH, "{connection_file}"],
                "display_name": "Python 3 (starts after 3 s)",
                "language": "python",
            }
        )
    )
    runtime = tmp_path / "runtime"
    env = {
        **os.environ,
        "JUPYTER_PATH": str(tmp_path / "data"),
        "JUPYTER_RUNTIME_DIR": str(runtime),
    }
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    server = start_server(port=port, root=tmp_path, token=TOKEN, log=log, env=env)
    client = None
    try:
        wait_until_up(
            lambda: fetch_json(f"{base}/api/status", token=TOKEN),
            server,
            log,
            timeout_s=60,
            poll_s=0.3,
        )
        _, client = notebook_kernel(base, "slow.ipynb", runtime, token=TOKEN)
        reply = client.execute_interactive("answer = 6 * 7", timeout=60)
        assert reply["content"]["status"] == "ok", reply["content"]
    finally:
        if client is not None:
            client.stop_channels()
        stop_server(server, timeout_s=30)
