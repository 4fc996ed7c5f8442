"""A real Jupyter server (pytest-jupyter, non-root base URL) with the extension loaded."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from traitlets.config import Config

from tests.integration.server.api_helpers import API, gpu_config


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu_config(**options): JupyterGpu options for the server")


@pytest.fixture
def jp_server_config() -> Config:
    """The simulated backend at 3 devices, sampling every 0.1 s (override per module)."""
    return gpu_config()


Fetch = Callable[..., Awaitable[Any]]


@pytest.fixture
def api_get(jp_fetch: Fetch) -> Callable[..., Awaitable[Any]]:
    """GET a route of the API and decode its JSON."""

    async def get(route: str, **params: str) -> Any:
        response = await jp_fetch(*API, route, params=params or None)
        assert response.code == 200
        assert response.headers["Content-Type"].startswith("application/json")
        return json.loads(response.body)

    return get
