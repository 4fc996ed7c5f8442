"""Shared test configuration: keep it small; fixtures of one area live beside its tests."""

from __future__ import annotations

import os

import pytest

from tests.compile_cache_reference import Reference, shared

# pytest-jupyter's fixtures (jp_fetch, jp_ws_fetch, jp_serverapp, ...) for the integration tests
# against a real Jupyter server. pytest only honours pytest_plugins in the top-level conftest.
pytest_plugins = ["pytest_jupyter.jupyter_server"]


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
