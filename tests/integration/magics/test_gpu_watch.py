"""``%gpu --watch``: a live ipywidgets view fed by a kernel thread; env backend; plain No GPU."""

from __future__ import annotations

import time

import pytest

from jupyter_gpu.backends import BACKEND_ENV, plain_no_gpu
from jupyter_gpu.magics.gpu import watch as gpu_watch
from tests.helpers import wait_for
from tests.watch_notebook import run_watch_notebook

from .conftest import Shell


def test_watch_updates_from_a_thread_and_stops_on_off(shell: Shell) -> None:
    ran = shell.ok("w = %gpu --watch --backend simulated --interval 0.1 -o")
    assert ran.bundles("application/vnd.jupyter.widget-view+json")  # a widget was displayed
    watch = shell["w"]
    assert isinstance(watch, gpu_watch.GpuWatch)
    wait_for(lambda: watch.updates >= 3)
    first = watch.html.value
    wait_for(lambda: watch.html.value != first)
    assert "Simulated NVIDIA H200 (simulated)" in watch.html.value
    assert "util" in watch.html.value
    assert "SM " in watch.html.value  # GPM activity shown
    ran = shell.ok("%gpu --watch off")
    assert "Stopped 1 GPU view" in ran.text
    assert not watch.running
    assert watch.stopped_because == "%gpu --watch off"
    count = watch.updates
    time.sleep(0.3)
    assert watch.updates == count  # no update after stopping
    assert "stopped" in watch.html.value
    assert watch.sampler.threads_alive() == []


def test_watch_stops_when_its_output_is_cleared(shell: Shell) -> None:
    watch = shell.ok("w = %gpu --watch --backend simulated --interval 0.1 -o") and shell["w"]
    # What the front end sends: one view displayed, then removed with the output.
    watch.widget._view_count = 1
    assert watch.running
    watch.widget._view_count = 0
    assert watch.stopped_because == "its output was cleared"
    assert not watch.sampler.running


def test_watch_stops_on_its_button_and_at_exit(shell: Shell) -> None:
    a = shell.ok("a = %gpu --watch --backend simulated --interval 0.1 -o") and shell["a"]
    b = shell.ok("b = %gpu --watch --backend simulated --interval 0.1 -o") and shell["b"]
    a.stop_button.click()
    assert a.stopped_because == "Stop pressed"
    assert b.running
    gpu_watch._stop_at_exit()  # what atexit runs when the kernel shuts down
    assert b.stopped_because == "the kernel shut down"
    assert gpu_watch.active_watches() == []


def test_watch_interval_is_checked(shell: Shell) -> None:
    assert "0.1 to 60" in shell.usage_error("%gpu --watch --interval 0")


def test_watch_without_gpu_says_so_plainly(shell: Shell) -> None:
    watch = shell.ok("w = %gpu --watch --backend none --interval 0.1 -o") and shell["w"]
    wait_for(lambda: watch.updates >= 1)
    assert "No GPU" in watch.html.value
    assert "switched off" in watch.html.value
    watch.stop()


def test_no_gpu_points_to_the_simulated_demo(shell: Shell, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    text = shell.ok("%gpu").text
    assert "No GPU:" in text
    assert "--JupyterGpu.backend=simulated" in text
    plain = plain_no_gpu("NVML Shared Library Not Found")
    assert "no NVIDIA driver" in plain
    assert "simulated" in plain


def test_gpu_follows_the_servers_simulated_backend(
    shell: Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BACKEND_ENV, "simulated")
    monkeypatch.setenv("JUPYTER_GPU_SIMULATED_DEVICES", "3")
    lines = [line for line in shell.ok("%gpu").text.splitlines() if line.startswith("GPU ")]
    assert len(lines) == 3
    assert all("(simulated)" in line for line in lines)


@pytest.mark.slow
def test_watch_in_a_real_kernel_updates_while_a_cell_runs() -> None:
    figures = run_watch_notebook("time.sleep(2.0)", backend="simulated", interval_s=0.1)
    assert figures["widget_views"] == 1
    assert figures["after"] - figures["before"] >= 8  # updates arrived while the cell ran
    assert figures["running"]
    assert "(simulated)" in figures["html"]
    assert figures["after_off"] == {"stopped_because": "%gpu --watch off", "running": False}
    assert any("simulated" in h for h in figures["stored_html"])  # what the front end got
