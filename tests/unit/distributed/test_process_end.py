"""``end_process``: a process ends at once, yet keeps everything a normal exit would show.

The child writes to a file (so the C library's ``stdout`` is fully buffered, as a rank's is once
its output goes to ``rank-N.log``), starts a thread that is not a daemon, registers an ``atexit``
handler, prints through C's ``printf`` and through Python, then calls ``end_process(3)``. Every
line must reach the file, the thread's before the handler's (the interpreter waits for threads
before it runs the handlers), and the status must be 3.

Whether the interpreter was finalized shows in a witness: an object whose ``__del__`` prints,
kept alive to the end, is destroyed only by a normal end. A normal end is what
``JUPYTER_GPU_FULL_EXIT=1`` asks for and what a process that initialised CUDA gets (a stand-in
``torch`` module whose ``cuda.is_initialized()`` is true: this machine has no GPU).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jupyter_gpu.distributed.process_end import FULL_EXIT_ENV
from tests.helpers import repo_env

CHILD = """
import atexit, ctypes, sys, threading, time, types
from jupyter_gpu.distributed.process_end import end_process

if sys.argv[1] == "cuda":  # what torch says once this process made a CUDA context
    cuda = types.SimpleNamespace(is_initialized=lambda: True)
    sys.modules["torch"] = types.SimpleNamespace(cuda=cuda)

class Witness:
    def __del__(self):
        print("the interpreter was finalized", flush=True)

witness = Witness()

def late():
    time.sleep(0.3)  # still running when end_process is called
    print("the thread finished", flush=True)

threading.Thread(target=late).start()
atexit.register(print, "the atexit handler ran")
ctypes.CDLL(None).printf(b"C stdio, never flushed by hand\\n")
print("python's buffered line")  # no flush: sys.stdout is a file, block-buffered
end_process(3)
print("never reached")
"""


@pytest.mark.parametrize(
    ("case", "finalized"),
    [("quick", False), ("full_exit", True), ("cuda", True)],
)
def test_every_line_is_kept_and_the_status_is_passed_on(
    tmp_path: Path, case: str, finalized: bool
) -> None:
    log = tmp_path / "child.log"
    env = repo_env()
    env.pop(FULL_EXIT_ENV, None)
    env.pop("PYTHONUNBUFFERED", None)  # it would make C's stdout unbuffered (python -u does too)
    if case == "full_exit":
        env[FULL_EXIT_ENV] = "1"
    with log.open("wb") as out:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, case], stdout=out, stderr=subprocess.STDOUT, env=env,
            timeout=60, check=False,
        )  # fmt: skip
    lines = log.read_text().splitlines()
    assert done.returncode == 3, lines
    assert "C stdio, never flushed by hand" in lines
    assert "python's buffered line" in lines
    assert "never reached" not in lines
    assert lines.index("the thread finished") < lines.index("the atexit handler ran"), lines
    assert ("the interpreter was finalized" in lines) is finalized, lines
