"""The packages import one another one way: the ground floor never reaches up.

ruff bans ``pynvml`` outside ``jupyter_gpu/nvml/``, torch in the server and deleting outside
``jupyter_gpu/compile_cache/``; this test holds the rest of the plan (docs/architecture.md):
which package each lower package may import, and no circle between packages. Imports inside
functions count too: a lazy import is still a tie. Inside ``jupyter_gpu/magics/`` it holds the
shared rooms (``output/``, ``shell/``, ``probes/``, ``replay/``, ``causes/``) to the same plan: each
imports only the rooms below it and never a magic. It also reads every call for what ruff's
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

MAGICS = PACKAGE / "magics"

# The magics' shared rooms, and which of the others each may import (docs/architecture.md, "The
# magics' rooms"). The magics themselves (amp/, compile/, memory/...) stand above every room; a
# room never imports a magic, so what two magics share never reaches into a third.
ROOMS: dict[str, set[str]] = {
    "output": set(),  # formats, tables, figures
    "shell": {"output"},  # quiet.py shows its notes through output
    "probes": {"shell"},  # torch on demand, kineto kept quiet
    "replay": {"shell", "output", "probes"},  # settings.py puts TF32 back through probes
    "causes": {"shell", "output", "probes"},  # a cause quotes a probe's figures
}


def _imported_names(path: Path) -> set[str]:
    """The dotted ``jupyter_gpu`` names one module imports (``from a import b`` gives ``a.b``)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                module = node.module
            else:
                package = list(parts[: len(parts) - node.level])
                module = ".".join([*package, *([node.module] if node.module else [])])
            names = [f"{module}.{alias.name}" for alias in node.names]
        found |= {n for n in names if n.startswith("jupyter_gpu.")}
    return found


def _imports(path: Path) -> set[str]:
    """The ``jupyter_gpu`` packages (first name under it) that one module imports."""
    return {name.split(".")[1] for name in _imported_names(path)}


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


def magics_graph() -> dict[str, set[str]]:
    """Package under ``jupyter_gpu/magics/`` (a room or a magic) -> the others it imports."""
    packages = {p.name for p in MAGICS.iterdir() if (p / "__init__.py").is_file()}
    graph: dict[str, set[str]] = defaultdict(set)
    for path in MAGICS.rglob("*.py"):
        rel = path.relative_to(MAGICS)
        if len(rel.parts) == 1:  # magics/__init__.py registers every magic: above them all
            continue
        source = rel.parts[0]
        graph[source] |= {
            name.split(".")[2]
            for name in _imported_names(path)
            if name.startswith("jupyter_gpu.magics.") and name.split(".")[2] in packages
        } - {source}
    return graph


def _circle(graph: dict[str, set[str]]) -> None:
    """Fail with the first import circle found in ``graph``."""
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


def _reaching_up(graph: dict[str, set[str]], plan: dict[str, set[str]]) -> dict[str, set[str]]:
    """What each package of ``plan`` imports beyond what the plan allows it."""
    assert set(plan) <= set(graph)  # a renamed package must be renamed in the plan too
    return {p: graph[p] - allowed for p, allowed in plan.items() if graph[p] - allowed}


def test_lower_floors_import_only_what_the_plan_allows() -> None:
    assert _reaching_up(package_graph(), ALLOWED) == {}


def test_no_circle_between_packages() -> None:
    _circle(package_graph())


def test_magics_rooms_import_only_the_rooms_below_them() -> None:
    assert _reaching_up(magics_graph(), ROOMS) == {}


def test_no_circle_between_the_magics_packages() -> None:
    _circle(magics_graph())


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
