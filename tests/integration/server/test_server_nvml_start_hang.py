"""NVML that hangs in ``nvmlInit``, through a real Jupyter server: every route answers at once.

The fake NVML's ``nvmlInit`` blocks from the server's start (a hung driver). Within two seconds
the server serves the host's readings, says that NVML has not answered (``nvml_wait_s`` and the
reason, in every route and the stream, checked against the OpenAPI schema) and answers no route
with a 503; once NVML answers, the GPUs come in without a restart.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from jupyter_server.serverapp import ServerApp
from prometheus_client.parser import text_string_to_metric_families
from traitlets.config import Config

from tests.helpers import wait_for_async
from tests.integration.server.api_helpers import API, gpu_config, validate
from tests.integration.server.fake_nvml_extension import (
    ON_FAKE_NVML,
    FakeNvmlGpuApp,
    fake_nvml_app,
)

Get = Callable[..., Awaitable[Any]]
Fetch = Callable[..., Awaitable[Any]]


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch) -> Config:
    monkeypatch.setattr(FakeNvmlGpuApp, "hang_at_start", frozenset({"nvmlInit"}))
    return gpu_config(**ON_FAKE_NVML, read_deadline_s=0.5)


@pytest.fixture
def app(jp_serverapp: ServerApp) -> Iterator[FakeNvmlGpuApp]:
    """The extension over the hung fake; NVML answers at the end whatever happened."""
    app = fake_nvml_app(jp_serverapp)
    yield app
    app.fake.release(None)


async def timed(get: Get, route: str) -> tuple[Any, float]:
    began = time.monotonic()
    body = await get(route)  # asserts a 200
    return body, time.monotonic() - began


async def metric_names(jp_fetch: Fetch) -> dict[str, Any]:
    body = (await jp_fetch(*API, "metrics")).body.decode()
    return {f.name: f for f in text_string_to_metric_families(body)}


async def test_every_route_answers_while_nvml_init_hangs_and_the_gpus_come_later(
    app: FakeNvmlGpuApp, api_get: Get, jp_fetch: Fetch, jp_ws_fetch: Fetch
) -> None:
    snapshot, took = await timed(api_get, "snapshot")
    assert took < 2.0  # not the 10 s wait for a first sample, then a 503
    validate(snapshot, "Snapshot")
    assert (snapshot["backend"], snapshot["devices"]) == ("nvml", [])
    assert snapshot["nvml_wait_s"] > 0
    assert snapshot["reason"].startswith("NVML has not answered for ")
    assert snapshot["host"]["mem_total_bytes"] > 0  # the host's readings are served
    history, took = await timed(api_get, "history")
    assert took < 2.0
    validate(history, "History")
    first = history["samples"][0]
    # The first sample came within two seconds of the start-up (the open's wait, a second).
    assert first["seq"] == 1
    assert first["nvml_wait_s"] < 2.0
    assert first["host"]["cpu_count"] > 0
    devices, took = await timed(api_get, "devices")
    assert took < 2.0
    validate(devices, "Devices")
    assert (devices["gpu_available"], devices["devices"]) == (False, [])
    assert devices["nvml_wait_s"] > 0
    assert devices["reason"].startswith("NVML has not answered for ")
    families = await metric_names(jp_fetch)
    assert families["jupyter_gpu_nvml_wait_seconds"].samples[0].value > 0
    info = families["jupyter_gpu_info"].samples[0].labels
    assert info["reason"].startswith("NVML has not answered yet")
    ws = await jp_ws_fetch(*API, "stream")
    try:
        message = json.loads(await asyncio.wait_for(ws.read_message(), 5))
        validate(message, "StreamMessage")
        assert message["sample"]["nvml_wait_s"] is not None
        assert app.fake.calls["nvmlInit"] == 1  # one thread in the hung call, however asked

        app.fake.release(None)  # the driver answers

        async def with_gpus() -> Any:
            sample = json.loads(await asyncio.wait_for(ws.read_message(), 5))["sample"]
            return sample if sample["devices"] else None

        sample = await wait_for_async(with_gpus, "the GPUs did not come in", timeout_s=30)
        assert (sample["nvml_wait_s"], sample["reason"]) == (None, None)
        assert [d["name"] for d in sample["devices"]] == ["Fake NVIDIA H200"] * 2
    finally:
        ws.close()
    devices = await api_get("devices")
    validate(devices, "Devices")
    assert (devices["gpu_available"], devices["nvml_wait_s"], len(devices["devices"])) == (
        True,
        None,
        2,
    )
    families = await metric_names(jp_fetch)
    assert "jupyter_gpu_nvml_wait_seconds" not in families
    assert families["jupyter_gpu_gpus"].samples[0].value == 2
