"""Keep kineto's own log lines out of the notebook while a magic starts or stops a profiler.

torch's profiler backend (kineto) writes a line straight to the process's stderr (file
descriptor 2, not Python's ``sys.stderr``) each time a trace starts and stops, e.g.
``USDT:2026-12-03 18:38:28 7220:7220 SyncActivityProfilerHandler.cpp:52] profiler_start``
(torch 2.13, seen on CPU in a plain IPython shell). A Jupyter kernel forwards fd 2 to the cell's
output, so every profile would show two lines the user did not write. Kineto has no switch for
these alone (``KINETO_LOG_LEVEL`` hides its errors too, and is read once per process), so
:func:`kineto_quiet` points fd 2 at ``/dev/null`` around the profiler's own start, step and stop
calls, never while the user's code runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def kineto_quiet() -> Iterator[None]:
    """Point fd 2 at /dev/null for the block (kineto's start/stop lines), then back.

    Where fd 2 cannot be duplicated (no such descriptor), the block runs as it is.
    """
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    try:
        with open(os.devnull, "w") as null:  # noqa: PTH123  # a raw fd is what dup2 takes
            os.dup2(null.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)
