"""A real kernel of a simulated server: its GPU process carries idle time and the idle flag."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from traitlets.config import Config

from tests.helpers import wait_for_async
from tests.integration.server.api_helpers import gpu_config

Fetch = Callable[..., Awaitable[Any]]
Get = Callable[..., Awaitable[Any]]


@pytest.fixture
def jp_server_config() -> Config:
    # Any idle time and any memory count, so a fresh, idle kernel is flagged at once.
    return gpu_config(idle_holder_minutes=0.0, idle_holder_gib=0.0, simulated_devices=1)


async def _kernel_processes(api_get: Get, kernel_id: str) -> list[dict[str, Any]]:
    last: dict[str, Any] = {}

    async def flagged() -> list[dict[str, Any]] | None:
        last["sample"] = sample = await api_get("snapshot")
        procs = [
            p for d in sample["devices"] for p in d["processes"] if p["kernel_id"] == kernel_id
        ]
        return procs if procs and procs[0]["idle_holder"] else None

    return await wait_for_async(
        flagged, lambda: f"kernel {kernel_id} never showed as an idle holder: {last}", poll_s=0.1
    )


async def test_idle_kernel_is_flagged_with_its_idle_time(jp_fetch: Fetch, api_get: Get) -> None:
    response = await jp_fetch("api", "kernels", method="POST", body=json.dumps({"name": "python3"}))
    kernel_id = json.loads(response.body)["id"]
    try:
        devices = await api_get("devices")
        assert devices["config"]["idle_holder_minutes"] == 0.0
        procs = await _kernel_processes(api_get, kernel_id)
        assert procs[0]["idle_s"] is not None
        assert procs[0]["idle_s"] >= 0
        assert procs[0]["used_mem_bytes"] > 0
    finally:
        await jp_fetch("api", "kernels", kernel_id, method="DELETE")
