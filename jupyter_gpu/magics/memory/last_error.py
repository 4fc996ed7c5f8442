"""The last error of the shell: the frames it keeps alive, their variables, and releasing them.

A failed cell's exception keeps its traceback, and the traceback keeps every frame of the
failed call with its local variables: a forward pass's activations stay allocated. Several
objects hold the exception: ``sys.last_exc`` (Python 3.12+) and ``sys.last_value`` /
``sys.last_traceback``, the shell's ``last_execution_result.error_in_exec`` until the next cell
ends, and whatever a user or a test kept; its ``__cause__`` and ``__context__`` hold the
tracebacks of the errors it was raised from. Dropping our references is not enough, so
releasing also clears the frames themselves.

On Python 3.10 to 3.12, ``frame.clear()`` leaves the frame's ``f_locals`` snapshot (a dict made
the first time anything reads ``frame.f_locals``; IPython reads it for every frame of a
traceback it shows, to honour ``__tracebackhide__``) holding every variable (CPython issue
113939, fixed in 3.13): the snapshot is emptied too.
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Iterable, Iterator
from typing import Any

TRACEBACK_PREFIX = "<last error> "
_SYS_ATTRS = ("last_exc", "last_value", "last_type", "last_traceback")
_MAX_ERRORS = 100  # exceptions followed through causes, contexts and groups


def last_error() -> BaseException | None:
    """The exception of the last failed cell, as the shell kept it (``sys.last_exc``)."""
    return getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)


def _roots(shell: Any) -> list[BaseException]:
    roots = [getattr(sys, "last_exc", None), getattr(sys, "last_value", None)]
    result = getattr(shell, "last_execution_result", None)
    if result is not None:
        roots += [
            getattr(result, "error_in_exec", None),
            getattr(result, "error_before_exec", None),
        ]
    return [e for e in roots if isinstance(e, BaseException)]


def last_error_tracebacks(shell: Any) -> list[types.TracebackType]:
    """The tracebacks the last error keeps alive: its own, then those of its causes.

    Follows ``__cause__``, ``__context__`` and exception groups from every holder the shell
    and ``sys`` have (each exception once).
    """
    tracebacks: list[types.TracebackType] = []
    last_tb = getattr(sys, "last_traceback", None)
    if isinstance(last_tb, types.TracebackType):
        tracebacks.append(last_tb)
    seen: set[int] = set()
    pending = _roots(shell)
    while pending and len(seen) < _MAX_ERRORS:
        error = pending.pop(0)
        if id(error) in seen:
            continue
        seen.add(id(error))
        if error.__traceback__ is not None:
            tracebacks.append(error.__traceback__)
        pending += [e for e in (error.__cause__, error.__context__) if e is not None]
        pending += [e for e in getattr(error, "exceptions", ()) if isinstance(e, BaseException)]
    return tracebacks


def _frames(tracebacks: Iterable[types.TracebackType]) -> Iterator[types.FrameType]:
    """Each frame of ``tracebacks`` once, outermost first."""
    seen: set[int] = set()
    for tb in tracebacks:
        current: types.TracebackType | None = tb
        while current is not None:
            frame = current.tb_frame
            if id(frame) not in seen:
                seen.add(id(frame))
                yield frame
            current = current.tb_next


def traceback_locals(tracebacks: Iterable[types.TracebackType]) -> Iterator[tuple[str, Any]]:
    """``(<last error> function.variable, value)`` for the locals of the frames of ``tracebacks``.

    Module-level frames (a cell: its locals are the notebook's globals) and IPython's own
    frames are left out.
    """
    for frame in _frames(tracebacks):
        fn = frame.f_code.co_name
        if fn == "<module>" or _is_ipython_frame(frame.f_code.co_filename):
            continue
        for var, value in list(frame.f_locals.items()):
            yield f"{TRACEBACK_PREFIX}{fn}.{var}", value


def _is_ipython_frame(filename: str) -> bool:
    return any(f"{sep}{pkg}{sep}" in filename for pkg in ("IPython", "ipykernel") for sep in "/\\")


def release_last_error(shell: Any) -> int:
    """Clear the frames the last error keeps, then drop ``sys``'s and IPython's references.

    Returns how many frames were cleared. A frame still running (or a suspended generator's,
    on 3.13+) cannot be cleared and is left as it is; the exception objects themselves stay
    where they are (the shell's last result keeps its error), only without their variables.
    """
    tracebacks = last_error_tracebacks(shell)
    cleared = sum(_clear(frame) for frame in _frames(tracebacks))
    for attr in _SYS_ATTRS:  # deleted, not set to None: %debug and %tb then say there is none
        if hasattr(sys, attr):
            delattr(sys, attr)
    for handler in ("InteractiveTB", "SyntaxTB"):
        tb_handler = getattr(shell, handler, None)
        if tb_handler is not None and getattr(tb_handler, "tb", None) is not None:
            tb_handler.tb = None
    return cleared


def _clear(frame: types.FrameType) -> bool:
    try:
        frame.clear()
    except RuntimeError:  # still executing (or, 3.13+, a suspended generator's)
        return False
    if sys.version_info < (3, 13) and frame.f_code.co_flags & inspect.CO_OPTIMIZED:
        # A function's frame (not module or class code, whose f_locals is a real namespace):
        # reading f_locals again re-syncs the snapshot with the now-empty variables and
        # returns it; what a debugger may have added to it goes too.
        snapshot = frame.f_locals
        if type(snapshot) is dict and snapshot is not frame.f_globals:
            snapshot.clear()
    return True
