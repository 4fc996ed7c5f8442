"""No notebook binds ``_`` itself: IPython then stops keeping the last result there.

Notebook 07 reads ``%%profile -o``'s result from ``_`` (``final_profile = _``). Its FP8 cell,
which runs only on a GPU, looped ``for _ in fixed:`` at the top level; from then on ``_`` held a
batch, and on the H200 ``final_profile.rows`` failed ("'list' object has no attribute 'rows'").
IPython's displayhook leaves a user's own ``_`` alone (``DisplayHook.update_user_ns``).
"""

import ast
import json
from pathlib import Path

import pytest
from IPython.core.inputtransformer2 import TransformerManager

NOTEBOOKS = sorted((Path(__file__).resolve().parents[3] / "notebooks").glob("*.ipynb"))


def top_level_underscore_bindings(source: str, ctx: type = ast.Store) -> list[int]:
    """Lines of a cell (IPython syntax) that bind ``_`` outside any function or class.

    With ``ctx=ast.Load``: the lines that read it there instead (IPython's last result).
    """
    tree = ast.parse(TransformerManager().transform_cell(source))
    lines = []
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    comprehensions = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)

    def visit(node: ast.AST) -> None:
        if isinstance(node, scopes + comprehensions):
            return  # a name bound in there is its own scope's
        if isinstance(node, ast.Name) and node.id == "_" and isinstance(node.ctx, ctx):
            lines.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return lines


def test_the_check_finds_a_loop_and_an_unpacking_but_not_a_comprehension() -> None:
    assert top_level_underscore_bindings("if True:\n    for _ in x:\n        pass") == [2]
    assert top_level_underscore_bindings("a, _ = f()") == [1]
    assert top_level_underscore_bindings("%amp on\nys = [f() for _ in x]") == []
    assert top_level_underscore_bindings("def g():\n    for _ in x:\n        pass") == []
    assert top_level_underscore_bindings("result = _", ast.Load) == [1]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_that_reads_the_last_result_never_binds_underscore(path: Path) -> None:
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    if not any(top_level_underscore_bindings("".join(c["source"]), ast.Load) for c in cells):
        return  # it never reads _ (a loop's throwaway name there harms nothing)
    found = {
        i: lines
        for i, cell in enumerate(cells)
        if (lines := top_level_underscore_bindings("".join(cell["source"])))
    }
    assert not found, f"{path.name}: cell: lines binding _ at the top level: {found}"
