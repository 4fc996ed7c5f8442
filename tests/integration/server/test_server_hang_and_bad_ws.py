"""A hung GPU (``hang:<gpu>``) and bad WebSocket traffic, through a real Jupyter server.

The event loop must keep answering while a GPU's read hangs, the other GPUs keep updating, and a
client that sends anything on the stream loses its own socket and nothing else.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from traitlets.config import Config

from tests.helpers import wait_for_async
from tests.integration.server.api_helpers import API, gpu_config, validate

Get = Callable[..., Awaitable[Any]]
Fetch = Callable[..., Awaitable[Any]]


@pytest.fixture
def jp_server_config() -> Config:
    """Three simulated GPUs; GPU 1's reads hang from 0.5 s on (a hung driver)."""
    return gpu_config(simulated_faults=["hang:1@0.5"], read_deadline_s=0.3)


async def until(get: Get, predicate: Callable[[Any], bool], timeout: float = 15.0) -> Any:
    last: dict[str, Any] = {}

    async def check() -> Any:
        last["snapshot"] = snapshot = await get("snapshot")
        return snapshot if predicate(snapshot) else None

    return await wait_for_async(
        check, lambda: str(last["snapshot"]["devices"]), timeout_s=timeout, poll_s=0.05
    )


async def test_a_hung_gpu_is_not_responding_and_the_server_answers(api_get: Get) -> None:
    first = await until(api_get, lambda s: s["devices"][1]["state"] == "not_responding")
    validate(first, "Snapshot")
    assert first["devices"][1]["stale_s"] >= 0
    assert first["devices"][1]["util_pct"] is None
    assert "has not answered" in first["devices"][1]["error"]
    assert first["age_s"] >= 0
    # While the read stays hung: the loop answers at once, the others update, the age stays low.
    seen = {first["seq"]}
    latencies = []

    async def new_samples_kept_coming() -> bool:
        start = time.perf_counter()
        snapshot = await api_get("snapshot")
        latencies.append(time.perf_counter() - start)
        seen.add(snapshot["seq"])
        assert snapshot["devices"][1]["state"] == "not_responding"
        assert snapshot["devices"][0]["state"] == snapshot["devices"][2]["state"] == "ok"
        assert snapshot["age_s"] < 5.0
        return len(seen) > 3

    await wait_for_async(new_samples_kept_coming, "no new samples while GPU 1 hung", poll_s=0.05)
    assert max(latencies) < 2.0  # functional bound; the p99 figure is benchmarks/hang_load.py
    later = await api_get("snapshot")
    assert later["devices"][1]["stale_s"] > first["devices"][1]["stale_s"]


async def test_devices_says_the_read_deadline(api_get: Get) -> None:
    devices = await api_get("devices")
    validate(devices, "Devices")
    assert devices["config"]["read_deadline_s"] == 0.3


async def test_the_stream_says_each_sample_s_age(jp_ws_fetch: Fetch) -> None:
    ws = await jp_ws_fetch(*API, "stream")
    try:
        for _ in range(3):
            message = json.loads(await asyncio.wait_for(ws.read_message(), 10))
            validate(message, "StreamMessage")
            assert 0 <= message["age_s"] < 5.0
    finally:
        ws.close()


async def read_until_closed(ws: Any, timeout: float = 10.0) -> int | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = await asyncio.wait_for(ws.read_message(), timeout)
        if message is None:
            code: int | None = ws.close_code
            return code
    raise AssertionError("the socket stayed open")


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ('{"type": "subscribe"}', 1008),  # well-formed, but clients send nothing
        ("not json at all \x00\xff", 1008),
        (b"\x00\x01\x02binary", 1008),
        ("x" * 100_000, 1009),  # oversized
    ],
    ids=["json", "garbage", "binary", "oversized"],
)
async def test_a_client_that_sends_is_closed_and_only_that_one(
    jp_ws_fetch: Fetch, api_get: Get, payload: str | bytes, code: int
) -> None:
    bystander = await jp_ws_fetch(*API, "stream")
    offender = await jp_ws_fetch(*API, "stream")
    try:
        await asyncio.wait_for(offender.read_message(), 10)  # the first sample
        await offender.write_message(payload, binary=isinstance(payload, bytes))
        assert await read_until_closed(offender) == code
        # The other socket and the REST routes carry on.
        seqs = [json.loads(await asyncio.wait_for(bystander.read_message(), 10)) for _ in range(3)]
        assert [m["type"] for m in seqs] == ["sample"] * 3
        assert (await api_get("snapshot"))["seq"] >= seqs[-1]["sample"]["seq"]
    finally:
        bystander.close()
        offender.close()
