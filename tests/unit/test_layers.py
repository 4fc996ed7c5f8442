"""The packages import one another one way: the ground floor never reaches up.

ruff bans ``pynvml`` outside ``jupyter_gpu/nvml/``, torch in the server and deleting outside
``jupyter_gpu/compile_cache/``; this test holds the rest of the plan (docs/architecture.md):
which package each lower package may import, and no circle between packages. Imports inside
functions count too: a lazy import is still a tie.
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
    "readings": {"compile_cache", "json_record"},  # a Sample carries the caches' records
    "host": {"readings"},
    "simulated": {"readings"},
    "nvml": {"readings", "simulated"},  # the simulated board's topology, in NVML's shapes
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
