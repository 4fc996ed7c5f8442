"""Run a cell magic's body like a normal cell, inside whatever context the magic set up.

The body goes through IPython's input transformers (so ``!ls`` and ``%time`` lines still work)
and AST transformers, runs in the notebook's namespace, and its last expression's value is
returned so the magic can hand it back to IPython for display (as ``%%time`` does). The code is
registered with IPython's compiler cache, so a traceback shows the cell's source lines. An
exception in the body propagates unchanged: the user sees the cell's own error, once.
"""

from __future__ import annotations

import ast
from typing import Any


class CellCode:
    """A cell body compiled once, ready to run (possibly several times)."""

    def __init__(self, shell: Any, cell: str) -> None:
        transformed = shell.transform_cell(cell)
        tree = shell.compile.ast_parse(transformed)
        tree = shell.transform_ast(tree)
        filename = shell.compile.cache(transformed, shell.execution_count, raw_code=cell)
        last: ast.Expression | None = None
        # A trailing semicolon hides the value, as in a normal cell.
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not cell.rstrip().endswith(";"):
            last = ast.Expression(tree.body.pop().value)
        self._shell = shell
        # shell.compile keeps the __future__ flags of earlier cells, like a normal cell.
        self._body = shell.compile(tree, filename, "exec") if tree.body else None
        self._last = shell.compile(last, filename, "eval") if last is not None else None

    def run(self, local_ns: dict[str, Any] | None = None) -> Any:
        """Execute the body in the notebook's namespace; return its last expression's value."""
        user_ns = self._shell.user_ns
        if self._body is not None:
            exec(self._body, user_ns, local_ns)  # noqa: S102  # the user's own cell
        if self._last is not None:
            return eval(self._last, user_ns, local_ns)  # noqa: S307  # the user's own cell
        return None


def cell_filenames(shell: Any) -> dict[str, int]:
    """IPython's map from a cell's code filename to its execution count, for "cell [7] line 3"."""
    mapping = getattr(shell.compile, "_filename_map", {})
    return {str(k): int(v) for k, v in mapping.items() if isinstance(v, int)}
