"""``JupyterGpu.simulated_faults`` through a real Jupyter server: what a browser test will see."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from traitlets.config import Config

from tests.integration.server.api_helpers import API, gpu_config, validate

Get = Callable[..., Awaitable[Any]]
Fetch = Callable[..., Awaitable[Any]]
LOST_AFTER_S = 0.6


@pytest.fixture
def jp_server_config() -> Config:
    """Three simulated GPUs: power Not Supported on 0, GPU 1 lost after a moment, 2 failing."""
    return gpu_config(
        simulated_faults=[
            "unsupported:0:power_w",
            "unsupported:0:processes",
            f"lost:1@{LOST_AFTER_S}",
            "error:2@0-3600",
        ]
    )


async def test_faults_show_as_the_states_nvml_would_give(api_get: Get) -> None:
    snapshot = await api_get("snapshot")
    validate(snapshot, "Sample")
    assert snapshot["simulated"] is True
    d0, _, d2 = snapshot["devices"]
    assert d0["state"] == "ok"
    assert (d0["power_w"], d0["processes"]) == (None, [])
    assert d0["unavailable"] == {
        "power_w": "Not Supported (simulated)",
        "processes": "Not Supported (simulated)",
    }
    assert d0["util_pct"] is not None  # only the named fields go
    assert d2["state"] == "error"
    assert d2["error"].startswith("Simulated fault")
    assert d2["util_pct"] is None


async def test_a_gpu_is_lost_on_schedule_and_the_stream_says_so(
    jp_ws_fetch: Fetch, jp_fetch: Fetch
) -> None:
    ws = await jp_ws_fetch(*API, "stream")
    states: list[str] = []
    try:
        deadline = time.monotonic() + 5
        while not states or states[-1] != "lost":
            message = json.loads(await asyncio.wait_for(ws.read_message(), 5))
            device = message["sample"]["devices"][1]
            states.append(device["state"])
            assert time.monotonic() < deadline, states
    finally:
        ws.close()
    validate(message, "StreamMessage")
    assert "ok" in states  # it was there first: the fault began on schedule, not at once
    assert device["error"].startswith("Simulated fault: this GPU is reported lost")
    assert device["mem_used_bytes"] is None
    metrics = (await jp_fetch(*API, "metrics")).body.decode().splitlines()
    assert any(
        m.startswith("jupyter_gpu_device_ok{") and 'gpu="1"' in m and m.endswith(" 0.0")
        for m in metrics
    )


async def test_devices_lists_every_gpu_still(api_get: Get) -> None:
    # A lost GPU stays in the static list: the UI keeps its card and shows the state.
    devices = await api_get("devices")
    assert [d["index"] for d in devices["devices"]] == [0, 1, 2]
