"""``tests.helpers.notebook_kernel`` gives a ready client even when the kernel is slow to start.

The GPU checks start kernels through it while the test suite loads every core; a kernel then
takes seconds before its heartbeat answers. Here the server's ``python3`` kernel waits 3 s
before it starts (a kernelspec of the same name earlier on ``JUPYTER_PATH``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers import running_server

TOKEN = "slow-kernel-check"
SLOW_LAUNCH = (
    "import runpy, sys, time; time.sleep(3); "
    "sys.argv = ['ipykernel_launcher', '-f', sys.argv[1]]; "
    "runpy.run_module('ipykernel_launcher', run_name='__main__')"
)


@pytest.mark.slow
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
    with running_server(
        tmp_path,
        token=TOKEN,
        log=tmp_path / "server.log",
        env={"JUPYTER_PATH": str(tmp_path / "data")},
        ready="api/status",
        poll_s=0.3,
    ) as server:
        _, client = server.kernel("slow.ipynb")  # through tests.helpers.notebook_kernel
        reply = client.execute_interactive("answer = 6 * 7", timeout=60)
        assert reply["content"]["status"] == "ok", reply["content"]
    assert server.exit_code == 0
    assert server.clients == [client]
    assert not client.channels_running  # stopped before the server was
