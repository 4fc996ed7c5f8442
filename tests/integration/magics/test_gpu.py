"""%gpu in a real IPython shell: no GPU here, and the labelled simulated backend."""

from __future__ import annotations

import subprocess
import sys

from .conftest import Shell


def test_no_gpu_is_said_plainly(shell: Shell) -> None:
    ran = shell.ok("%gpu")
    assert ran.text.strip().startswith("No GPU:")
    sample = shell.ok("s = %gpu -o -q").result
    assert sample.error_in_exec is None
    assert shell["s"].backend == "none"
    assert shell["s"].reason


def test_simulated_gpus_are_labelled(shell: Shell) -> None:
    ran = shell.ok("%gpu --backend simulated")
    lines = [line for line in ran.text.splitlines() if line.startswith("GPU ")]
    assert len(lines) >= 1
    assert all("(simulated)" in line and "util" in line and " of " in line for line in lines)
    assert "not using this GPU" in lines[0]
    html = "".join(ran.bundles("text/html"))
    assert "<table" in html
    assert "simulated" in html


def test_gpu_never_imports_torch() -> None:
    code = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance()\n"
        "ip.run_line_magic('load_ext', 'jupyter_gpu')\n"
        "ip.run_line_magic('gpu', '--backend simulated')\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "(simulated)" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_bad_backend_is_a_usage_error(shell: Shell) -> None:
    assert "auto, nvml, simulated, none" in shell.usage_error("%gpu --backend fake")


def test_simulated_topology_is_shown_and_labelled(shell: Shell) -> None:
    ran = shell.ok("t = %gpu --backend simulated --topology -o")
    assert "No GPU" not in ran.text
    assert "GPU0  X     NV18" in ran.text
    assert "P2P reads possible (simulated)" in ran.text
    assert shell["t"].simulated
    assert len(shell["t"].gpus) == 2  # the GPUs %gpu --backend simulated lists


def test_the_no_gpu_message_keeps_the_option_on_one_line(shell: Shell) -> None:
    from dataclasses import replace

    from jupyter_gpu.magics.gpu_watch import render_html
    from jupyter_gpu.sampling import read_once

    option = '<code style="white-space:nowrap">--JupyterGpu.backend=simulated</code>'
    html = "".join(shell.ok("%gpu").bundles("text/html"))
    assert option in html  # a browser breaks a line after a hyphen, but not inside this
    no_driver = replace(read_once("none"), reason="NVML Shared Library Not Found")
    assert option in render_html(no_driver)  # %gpu --watch's view
