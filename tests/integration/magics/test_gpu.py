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
