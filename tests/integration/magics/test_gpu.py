"""%gpu in a real IPython shell: no GPU here, the labelled simulated backend, a hung fake GPU."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time

import pytest

from jupyter_gpu.readings.deadline import READ_DEADLINE_S
from tests.fakes.fake_nvml import FakeNvml

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


def test_simulated_memory_on_this_kernel_says_what_is_simulated(
    shell: Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In the demo the simulated GPUs put a made-up job on each of their server's kernels,
    # this one among them; its torch here uses no GPU at all (CUDA is hidden in this test).
    import os

    from jupyter_gpu.sampling import once

    monkeypatch.setattr(once, "kernel_pids_of_server", lambda _root: [os.getpid()])
    ran = shell.ok("%gpu --backend simulated")
    first = next(line for line in ran.text.splitlines() if line.startswith("GPU 0 "))
    mine = first.split("this kernel: ", 1)[1]
    assert re.fullmatch(
        r"[\d.]+ [KMG]iB simulated \(made up by the demo backend; this kernel's torch holds "
        r"no GPU memory\)",
        mine,
    ), mine
    assert "made up by the demo backend" in "".join(ran.bundles("text/html"))
    # A kernel whose torch does use CUDA (a demo on a GPU machine): not these GPUs' figure.
    from jupyter_gpu.magics.gpu import magic

    monkeypatch.setattr(magic, "cuda_in_use", lambda: True)
    again = shell.ok("%gpu --backend simulated").text
    assert "this kernel's torch uses a real GPU, not shown here)" in again


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

    from jupyter_gpu.magics.gpu.report import watch_html
    from jupyter_gpu.sampling import read_once

    option = '<code style="white-space:nowrap">--JupyterGpu.backend=simulated</code>'
    html = "".join(shell.ok("%gpu").bundles("text/html"))
    assert option in html  # a browser breaks a line after a hyphen, but not inside this
    no_driver = replace(read_once("none"), reason="NVML Shared Library Not Found")
    assert option in watch_html(no_driver)  # %gpu --watch's view


def test_a_hung_gpu_is_named_within_the_deadline(
    shell: Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeNvml(devices=3)
    fake.hang(1)  # every NVML call on GPU 1 blocks, as with a hung driver
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    # Without a deadline %gpu would block for good: the fake answers after 30 s at the latest.
    with fake.released_after(1):
        start = time.monotonic()
        ran = shell.ok("%gpu --backend nvml")
        took = time.monotonic() - start
    for thread in threading.enumerate():  # the worker that was stuck in GPU 1's call
        if thread.name.startswith("jupyter-gpu"):
            thread.join(10)
    assert took < READ_DEADLINE_S + 0.1 + 1.5  # the deadline, the 0.1 s reading, busy cores
    lines = [line for line in ran.text.splitlines() if line.startswith("GPU ")]
    assert len(lines) == 3
    assert "util 50%" in lines[0]
    assert "util 50%" in lines[2]
    assert f"GPU 1 did not answer within {READ_DEADLINE_S:g} s" in lines[1]


def test_a_driver_that_hangs_at_start_is_said_within_the_deadline(
    shell: Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeNvml(devices=2)
    fake.hang(None, calls={"nvmlInit"})  # the driver does not answer nvmlInit
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with fake.released_after(None):
        took = []
        texts = []
        for _ in range(2):  # asked again while the first call is still out
            start = time.monotonic()
            texts.append(shell.ok("%gpu --backend nvml").text)
            took.append(time.monotonic() - start)
        calls = fake.calls["nvmlInit"]
    assert max(took) < 2 * READ_DEADLINE_S + 0.1 + 1.5  # its start-up deadline, busy cores
    for text in texts:
        assert f"NVML did not answer within {2 * READ_DEADLINE_S:g} s while starting" in text
        assert "start-up call is hung" in text  # what it means, not "no GPU here"
        assert "--JupyterGpu.backend=simulated" not in text
    assert calls == 1  # the second %gpu waited for the first's call: one thread in the driver
