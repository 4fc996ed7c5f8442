"""The GPU notebook runner's HTML copies name no folder of the machine they ran on."""

from __future__ import annotations

from tests.helpers import ROOT, load_script

runner = load_script(ROOT / "tests" / "gpu" / "run_notebooks_gpu.py")

PLACES = {
    "/tmp/notebooks-gpu-b_dst8l_": "$RUN",
    "/work/main": ".",
    "/tmp": "$TMPDIR",
    "/root": "~",
}


def test_each_local_folder_becomes_its_stand_in() -> None:
    text = (
        "File /work/main/jupyter_gpu/tutorials/checks_06.py:12; cache at "
        "/tmp/notebooks-gpu-b_dst8l_/inductor-cache/sh/c.py; cell /tmp/ipykernel_4064/40.py; "
        "Triton's /root/.triton/cache"
    )
    assert runner.local_paths_hidden(text, PLACES) == (
        "File ./jupyter_gpu/tutorials/checks_06.py:12; cache at $RUN/inductor-cache/sh/c.py; "
        "cell $TMPDIR/ipykernel_4064/40.py; Triton's ~/.triton/cache"
    )


def test_only_a_path_inside_a_whole_folder_is_replaced() -> None:
    text = "/tmpfiles/a, /var/tmp/b, /work/main2/c, /usr/lib/python3.12, <code>/tmp</code> on tmpfs"
    assert runner.local_paths_hidden(text, PLACES) == text


def test_a_home_of_slash_stands_in_for_nothing() -> None:
    assert runner.local_paths_hidden("/usr/lib/x", {"/": "~"}) == "/usr/lib/x"
