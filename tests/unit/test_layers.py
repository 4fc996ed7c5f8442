"""The packages import one another one way: the ground floor never reaches up.

ruff bans ``pynvml`` outside ``jupyter_gpu/nvml/``, torch in the server and deleting outside
``jupyter_gpu/compile_cache/``; this test holds the rest of the plan (docs/architecture.md):
which package each lower package may import, and no circle between packages. Imports inside
functions count too: a lazy import is still a tie. It also reads every call for what ruff's
bans cannot see: ``Path.unlink``, ``.rmdir``, ``.rename``, ``.replace`` on a path (methods of
an object, not names ruff can resolve), so that only the compile-cache package deletes.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "jupyter_gpu"

# What each package of the lower floors may import (the other jupyter_gpu packages it uses).
ALLOWED: dict[str, set[str]] = {
    "json_record": set(),
    "compile_cache": {"json_record"},
    "new_files": {"compile_cache"},  # its temporary names go through the package that deletes
    "readings": {"compile_cache", "json_record"},  # a Sample carries the caches' records
    "host": {"readings"},
    "simulated": {"readings"},
    "nvml": {"readings"},  # never the simulated backend: the demo is not the driver's
    "backends": {"readings", "nvml", "simulated"},
    "sampling": {"readings", "host", "compile_cache", "backends", "simulated"},
    "options": {"backends", "simulated"},  # the backends' names, the faults' grammar in help
    "config": {"options", "simulated"},
}


def _imports(path: Path) -> set[str]:
    """The ``jupyter_gpu`` packages (first name under it) that one module imports."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.ImportFrom):
            package = list(parts[: len(parts) - node.level])
            names = [".".join([*package, *([node.module] if node.module else [])])]
        found |= {n.split(".")[1] for n in names if n.startswith("jupyter_gpu.")}
    return found


def package_graph() -> dict[str, set[str]]:
    """Package (or top-level module) -> the other packages it imports."""
    graph: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "labextension" or rel == Path("__init__.py"):
            continue
        source = rel.with_suffix("").parts[0]
        graph[source] |= _imports(path) - {source, "_version"}
    return graph


def test_lower_floors_import_only_what_the_plan_allows() -> None:
    graph = package_graph()
    assert set(ALLOWED) <= set(graph)  # a renamed package must be renamed here too
    reaching_up = {p: graph[p] - allowed for p, allowed in ALLOWED.items() if graph[p] - allowed}
    assert reaching_up == {}


def test_no_circle_between_packages() -> None:
    graph = package_graph()
    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, f"import circle: {' -> '.join((*path, node))}"
        if node in done:
            return
        for other in sorted(graph.get(node, ())):
            visit(other, (*path, node))
        done.add(node)

    for package in sorted(graph):
        visit(package, ())


# Calls that delete or replace a file, by the module they are called on ("" for any object).
DELETING: dict[str, set[str]] = {
    "os": {"remove", "unlink", "rmdir", "removedirs", "replace", "rename", "renames"},
    "shutil": {"rmtree", "move"},
    "tempfile": {"TemporaryDirectory", "NamedTemporaryFile"},
    "": {"unlink", "rmdir", "rmtree", "rename"},  # Path's methods (and anything so named)
}


def _deletions(path: Path) -> list[str]:
    """``line: call`` for each call in one module that deletes, or replaces, a file."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module in DELETING:
            found += [
                f"{node.lineno}: from {node.module} import {alias.name}"
                for alias in node.names
                if alias.name in DELETING[node.module]
            ]
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        attr, owner = node.func.attr, node.func.value
        module = owner.id if isinstance(owner, ast.Name) and owner.id in DELETING else ""
        # Path.replace(target) takes one argument; str.replace two or three.
        path_replace = attr == "replace" and len(node.args) == 1 and not node.keywords
        if attr in DELETING[module] or attr in DELETING[""] or path_replace:
            found.append(f"{node.lineno}: {ast.unparse(node.func)}()")
    return found


def test_only_the_compile_cache_package_deletes() -> None:
    deleting = {
        str(path.relative_to(PACKAGE.parent)): calls
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] not in {"compile_cache", "labextension"}
        and (calls := _deletions(path))
    }
    assert deleting == {}


def test_the_deletion_check_sees_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os, shutil, tempfile\n"
        "from os import unlink\n"
        "os.replace('a', 'b')\n"
        "p.replace(q)\n"
        "p.unlink(missing_ok=True)\n"
        "tempfile.TemporaryDirectory()\n"
        "'text'.replace('a', 'b')\n"
        "items.remove(3)\n"
    )
    assert _deletions(sample) == [
        "2: from os import unlink",
        "3: os.replace()",
        "4: p.replace()",
        "5: p.unlink()",
        "6: tempfile.TemporaryDirectory()",
    ]
