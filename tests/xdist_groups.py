"""pytest-xdist's ``--dist loadgroup``: the tests of one ``xdist_group`` run on one worker.

pytest-xdist tells its scheduler a test's group by appending ``@<group>`` to the test's node id
in the worker that collected it; from pytest 9.2 (structured node ids) that assignment has no
effect, so every grouped test is scheduled on its own (pytest-dev/pytest-xdist#1386). This
plugin (loaded by tests/conftest.py) appends the group the same way to the structured id, only
in a ``--dist loadgroup`` worker, and only to a test whose id still lacks it: where pytest-xdist
names the group itself, it does nothing.
"""

from __future__ import annotations

import os

import pytest


class _GroupNames:
    """Appends each grouped test's ``@<group>`` to its node id (see the module)."""

    @pytest.hookimpl(trylast=True)  # after pytest-xdist's own hook
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            groups = sorted({_group_name(m) for m in item.iter_markers("xdist_group")})
            suffix = "@" + "_".join(groups)
            if not groups or item.nodeid.endswith(suffix):
                continue
            named = f"{item.nodeid}{suffix}"
            if hasattr(item, "_id"):
                from _pytest.nodes import NodeId

                item._id = NodeId.parse(named)
            else:
                item._nodeid = named


def _group_name(mark: pytest.Mark) -> str:
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


def pytest_configure(config: pytest.Config) -> None:
    # Only in a pytest-xdist worker of a --dist loadgroup run (xdist sets "loadgroup" there).
    if os.environ.get("PYTEST_XDIST_WORKER") and getattr(config.option, "loadgroup", False):
        config.pluginmanager.register(_GroupNames(), "jupyter-gpu-xdist-groups")
