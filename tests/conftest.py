"""Shared test configuration: keep it small; fixtures of one area live beside its tests."""

# pytest-jupyter's fixtures (jp_fetch, jp_ws_fetch, jp_serverapp, ...) for the integration tests
# against a real Jupyter server. pytest only honours pytest_plugins in the top-level conftest.
pytest_plugins = ["pytest_jupyter.jupyter_server"]
