"""Where in the user's code an event came from: ``cell [3] line 4 in step`` or ``train.py:12``.

From the Python frames torch records with ``with_stack`` (``--stack``), or from a live frame
(the sync pass, ``syncs.py``). A frame in a library (torch, site-packages) is never the place.
"""

from __future__ import annotations

from typing import Any

from jupyter_gpu.magics.shell.origin import is_library_file

from .rows import PY_EVENT


def place(filename: str, lineno: int, fn: str, cell_names: dict[str, int]) -> str:
    """Where in the user's code: ``cell [3] line 4 in step`` or ``train.py:12 in step``."""
    if filename in cell_names:
        # torch's stacks give a cell's module-level frame line 0: the cell alone says it
        at = f" line {lineno}" if lineno > 0 else ""
        return f"cell [{cell_names[filename]}]{at}" + ("" if fn == "<module>" else f" in {fn}")
    return f"{filename.rsplit('/', 1)[-1]}:{lineno} in {fn}"


def is_python_event(evt: Any) -> bool:
    """A Python-function event (recorded with ``with_stack``), not an op."""
    if getattr(evt, "is_python_function", False):
        return True
    name = evt.name
    return name.startswith("<built-in") or PY_EVENT.match(name) is not None


def stack_of(evt: Any) -> list[str]:
    """``FunctionEvent.stack``: Python frames as ``file(line): fn``, innermost first."""
    return list(getattr(evt, "stack", None) or ())


def stack_place(frames: list[str], cell_names: dict[str, int]) -> str:
    """The innermost user-code frame of a stack as a place; "" if it has none.

    ``frames``: innermost first, e.g. ``["torch/nn/...(130): forward",
    "<ipython-input-3-ab>(4): step"]``.
    """
    for frame in frames:
        match = PY_EVENT.match(frame)
        if match and not is_library_file(match["file"]):
            return place(match["file"], int(match["line"]), match["fn"], cell_names)
    return ""


def event_place(evt: Any, cell_names: dict[str, int]) -> str:
    """The nearest user-code Python frame above ``evt`` ("cell [3] line 4 in step").

    From the Python-function events above it (torch 2.13 records them with ``with_stack``);
    failing those, from the stack strings of the op or of the nearest op above it that has
    them (torch 2.11 records no Python-function events, only these, and only with the
    experimental ``verbose`` option).
    """
    parents = []
    parent = evt.cpu_parent
    while parent is not None:
        parents.append(parent.name)  # ops' names never match PY_EVENT: only frames count
        parent = parent.cpu_parent
    found = stack_place(parents, cell_names)
    if found:
        return found
    node = evt
    while node is not None:
        frames = stack_of(node)
        if frames:
            return stack_place(frames, cell_names)
        node = node.cpu_parent
    return ""
