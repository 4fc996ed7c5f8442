"""Shared test configuration: keep it small; fixtures of one area live beside its tests.

Slow tests (marked ``slow``, or using a fixture of ``SLOW_FIXTURES``) are left out of a plain
``python -m pytest``, the developer's loop; ``--slow`` (what ``.ci/test`` passes) runs them too,
and so does naming one by its node id or choosing by mark (``-m``). tests/README.md says which
tests are slow and how the suite runs in CI.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.compile_cache_reference import Reference, shared

# pytest-jupyter's fixtures (jp_fetch, jp_ws_fetch, jp_serverapp, ...) for the integration tests
# against a real Jupyter server; tests/xdist_groups.py keeps an xdist_group on one worker. pytest
# only honours pytest_plugins in the top-level conftest.
pytest_plugins = ["pytest_jupyter.jupyter_server", "tests.xdist_groups"]

#: Fixtures that make every test using them slow, and why.
SLOW_FIXTURES = {
    "torch_caches": "two real torch.compile runs in fresh processes, once per test run",
}


def pytest_configure(config: pytest.Config) -> None:
    # One intra-op thread for every torch process the tests start (the workers, kernels, ranks,
    # servers: they inherit this environment), unless OMP_NUM_THREADS is set already. The tests
    # run many such processes at once, and each would otherwise start a thread per core whose
    # OpenMP threads spin while they wait for work: on 2 cores the suite spent a third of its
    # CPU that way (the figures: tests/README.md, "Where CI's time goes"). A run that chooses
    # the GPU checks (-m gpu) keeps torch's own count: what they measure on the CPU's side is a
    # figure of the machine, as a user's kernel would run it.
    markexpr = config.getoption("markexpr") or ""
    if not ("gpu" in markexpr and "not gpu" not in markexpr):
        os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--slow",
        action="store_true",
        help="also run the tests marked slow (.ci/test does; a plain run leaves them out)",
    )


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist renames grouped tests' node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not SLOW_FIXTURES.keys().isdisjoint(item.fixturenames):
            item.add_marker(pytest.mark.slow)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Files with slow tests first (each file's tests in their order): a long test that
        # starts last keeps one worker busy while the others have nothing left to do.
        slow_files = {i.path for i in items if i.get_closest_marker("slow")}
        items.sort(key=lambda i: i.path not in slow_files)
    if config.getoption("--slow") or config.getoption("markexpr"):
        return  # everything, or what -m chooses
    named = _named_tests(config)
    kept = [i for i in items if not i.get_closest_marker("slow") or _is_named(i, named)]
    keep = set(kept)
    left_out = [i for i in items if i not in keep]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept
        config.stash[_LEFT_OUT] = len(left_out)


_LEFT_OUT = pytest.StashKey[int]()


def pytest_report_collectionfinish(config: pytest.Config) -> str | None:
    left = config.stash.get(_LEFT_OUT, 0)
    if not left:
        return None
    return f"{left} slow tests left out: --slow runs them too (.ci/test does)"


def _named_tests(config: pytest.Config) -> list[str]:
    """The node ids named on the command line (``path::name``), relative to the rootdir."""
    named = []
    for arg in config.args:
        path, sep, rest = arg.partition("::")
        if not sep:
            continue
        try:
            relative = Path(path).resolve().relative_to(config.rootpath)
        except ValueError:
            continue
        named.append(f"{relative.as_posix()}::{rest}")
    return named


def _is_named(item: pytest.Item, named: list[str]) -> bool:
    # tests/x.py::test_a names test_a and test_a[param]; tests/x.py::Class names its methods.
    return any(item.nodeid == n or item.nodeid.startswith((n + "[", n + "::")) for n in named)


@pytest.fixture(scope="session")
def torch_caches(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """Caches torch wrote, compiling with this torch (``tests/compile_cache_reference.py``).

    Session-wide: the compile tests (unit, server, tutorials) share one pair of compiles. Tests
    that delete work on copies.
    """
    pytest.importorskip("torch")
    # Under pytest-xdist each worker has a base temp of its own inside the run's: share that.
    base = tmp_path_factory.getbasetemp()
    run = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return shared(run / "torch-caches")
