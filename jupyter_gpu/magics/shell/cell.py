"""Run a cell magic's body like a normal cell, inside whatever context the magic set up.

The body goes through IPython's input transformers (so ``!ls`` and ``%time`` lines still work)
and AST transformers, runs in the notebook's namespace, and its last expression's value is
returned so the magic can hand it back to IPython for display (as ``%%time`` does). The code is
registered with IPython's compiler cache, so a traceback shows the cell's source lines. Line
numbers are the cell's as the notebook shows them (a cell magic's body starts on line 2, under
its ``%%magic`` line), so "cell [7] line 4" points at the line the user sees. An exception in
the body propagates unchanged: the user sees the cell's own error, once.
"""

from __future__ import annotations

import ast
from typing import Any


class CellCode:
    """A cell body compiled once, ready to run (possibly several times)."""

    def __init__(self, shell: Any, cell: str, *, first_line: int = 2) -> None:
        """Compile ``cell``, whose first line is the notebook's line ``first_line``.

        2 for a cell magic's body (under its ``%%magic`` line), 1 for a line magic's statement.
        """
        # Blank lines above the body: its line numbers (in tracebacks, "called from", syncs)
        # are then the cell's own, and the cached source still lines up with them.
        transformed = "\n" * (first_line - 1) + shell.transform_cell(cell)
        tree = shell.compile.ast_parse(transformed)
        tree = shell.transform_ast(tree)
        filename = shell.compile.cache(transformed, running_cell(shell), raw_code=cell)
        last: ast.Expression | None = None
        # A trailing semicolon hides the value, as in a normal cell.
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not cell.rstrip().endswith(";"):
            last = ast.Expression(tree.body.pop().value)
        self._shell = shell
        # shell.compile keeps the __future__ flags of earlier cells, like a normal cell.
        self._body = shell.compile(tree, filename, "exec") if tree.body else None
        self._last = shell.compile(last, filename, "eval") if last is not None else None

    @property
    def codes(self) -> list[Any]:
        """The compiled code objects that :meth:`run` executes (to read what they reach)."""
        return [c for c in (self._body, self._last) if c is not None]

    def run(self, local_ns: dict[str, Any] | None = None) -> Any:
        """Execute the body in the notebook's namespace; return its last expression's value."""
        user_ns = self._shell.user_ns
        if self._body is not None:
            exec(self._body, user_ns, local_ns)  # noqa: S102  # the user's own cell
        if self._last is not None:
            return eval(self._last, user_ns, local_ns)  # noqa: S307  # the user's own cell
        return None


def running_cell(shell: Any) -> int:
    """The execution count of the cell now running (its "In [7]").

    IPython 9 counts ``shell.execution_count`` up before a cell runs, IPython 8 after it, so
    that is the next cell's number or this one's; the result IPython fills for this cell (set
    before the cell's code runs) says which.
    """
    result = getattr(getattr(shell, "displayhook", None), "exec_result", None)
    count = getattr(result, "execution_count", None)
    return count if isinstance(count, int) else int(shell.execution_count)


def cell_filenames(shell: Any) -> dict[str, int]:
    """IPython's map from a cell's code filename to its execution count, for "cell [7] line 3"."""
    mapping = getattr(shell.compile, "_filename_map", {})
    return {str(k): int(v) for k, v in mapping.items() if isinstance(v, int)}
