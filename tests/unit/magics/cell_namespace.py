"""A cell run into a plain namespace, and what repeated runs of an expression reach from it.

Shared by the replay tests (test_reach_and_state.py, test_restore_state.py): a plain dict stands
in for the notebook's globals, which is all ``reach`` reads.
"""

from __future__ import annotations

from typing import Any

import torch

from jupyter_gpu.magics.replay.reach import Named, reach


def run_source(source: str) -> dict[str, Any]:
    ns: dict[str, Any] = {"__name__": "__main__", "torch": torch}
    exec(compile(source, "<cell>", "exec"), ns)
    return ns


def reached(ns: dict[str, Any], expr: str, named: Named | None = None) -> Any:
    """``reach`` over ``expr`` as if it were cell [3]'s code."""
    return reach([compile(expr, "<expr>", "eval")], ns, named or Named(), {"<cell>": 3})
