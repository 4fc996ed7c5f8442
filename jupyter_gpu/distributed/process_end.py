"""End a process we started as soon as its work is done: without finalizing the interpreter.

A Python process that imported torch spends a good part of a second ending normally: the
interpreter's finalization, module teardown and full garbage collections over torch's ~170,000
objects (0.1 s each on the 2-core build VM). Every ``%%torchrun`` cell paid it twice in a row
(the ranks, then torchrun's agent, which waits for them), and none of it is work the user asked
for. ``benchmarks/torchrun_launch.py`` times both ends; on the build VM (2026-12-07, 12 rounds):
an empty two-rank gloo cell took 5.08 s ending normally and 4.10 s through :func:`end_process`
(1.27x faster, 1.18-1.36x), a process that imports torch 0.36 s less (0.16-0.52 s).

:func:`end_process` does what a normal exit does that a program can notice, then leaves at once,
the way ``multiprocessing`` ends its children (``Process._bootstrap``: ``threading._shutdown``,
flush, ``os._exit``): it waits for the threads the interpreter would wait for, runs the
``atexit`` handlers (``logging``'s shutdown, ``weakref.finalize`` objects, the user's own),
flushes Python's streams and the C library's (NCCL and C++ code print through ``stdio``, which
``os._exit`` would drop), then calls ``os._exit``. What it skips: freeing memory the operating
system takes back anyway, and the destructors of objects still alive (a rank's cell namespace is
cleared and collected before, so the cell's own objects are finalized; open files are closed by
the operating system).

``os._exit`` also skips what C libraries registered with ``atexit(3)``. A process that
initialised CUDA therefore ends the normal way: the CUDA runtime tears down through such
handlers, and so may a profiler injected into the process (Nsight Systems, CUPTI), whose data
must not be lost (the quick end has never been tried in a process with CUDA). ``%%torchrun``'s
agent never touches CUDA; a CPU rank (gloo) does not unless its cell does. On one H100 an
``nccl`` rank ending the normal way and the agent ending quickly passed the GPU checks, and
there the agent's quick end alone saved nothing measurable in a 9 s cell (five rounds, the
interval crossing zero; benchmarks/RESULTS.md, 2026-12-07).

Only for processes this package starts and whose whole life it runs (``%%torchrun``'s agent
and ranks): never in a user's kernel. ``JUPYTER_GPU_FULL_EXIT=1`` in their environment (the
kernel's, or ``%%torchrun --env``) makes them end the normal way: for a tool that needs the
interpreter finalized, and for ``benchmarks/torchrun_launch.py``, which times both ways.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import sys
import threading
from typing import NoReturn

#: Set to ``1``: end the normal way, finalizing the interpreter (``sys.exit``).
FULL_EXIT_ENV = "JUPYTER_GPU_FULL_EXIT"


def end_process(code: int = 0) -> NoReturn:
    """Wait for non-daemon threads, run ``atexit`` handlers, flush every stream, ``_exit(code)``.

    In a process that initialised CUDA, or with ``JUPYTER_GPU_FULL_EXIT=1``, ``sys.exit(code)``
    instead (the module says why).
    """
    if os.environ.get(FULL_EXIT_ENV) == "1" or _cuda_initialised():
        sys.exit(code)
    main = threading.main_thread()
    for thread in threading.enumerate():  # what the interpreter waits for before atexit
        if thread is not main and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()  # the handlers a normal exit runs, in its order
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or broken stream: nothing to keep
            stream.flush()
    with contextlib.suppress(OSError, AttributeError):  # no C library: nothing buffered there
        ctypes.CDLL(None).fflush(None)
    os._exit(code)


def _cuda_initialised() -> bool:
    torch = sys.modules.get("torch")  # never imported here: a process without torch has no CUDA
    cuda = getattr(torch, "cuda", None)
    try:
        return bool(cuda is not None and cuda.is_initialized())
    except Exception:  # noqa: BLE001  # a torch that cannot say: the normal, safe end
        return True
