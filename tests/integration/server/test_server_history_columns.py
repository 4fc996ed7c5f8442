"""GET history with resolution/points/limit: columns from the ring and the long history."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import tornado.httpclient
from traitlets.config import Config

from tests.helpers import wait_for_async
from tests.integration.server.api_helpers import API, gpu_config, validate

Get = Callable[..., Awaitable[Any]]
Fetch = Callable[..., Awaitable[Any]]


@pytest.fixture
def jp_server_config() -> Config:
    """Two simulated GPUs with an hour of seeded past, 10 s buckets."""
    return gpu_config(simulated_devices=2, history_s=30.0, simulated_seed_history_s=3600.0)


async def _when_ready(api_get: Get, route: str) -> Any:
    """``route``'s body once the server answers it: a 503 ("try again in a moment") while the
    seeded past is written and no live sample is in yet (beside the whole suite on 2 cores, that
    outlasted the server's own 10 s wait for a first sample)."""

    async def answered() -> Any:
        try:
            return await api_get(route)
        except tornado.httpclient.HTTPClientError as err:
            if err.code != 503:
                raise
            return None

    return await wait_for_async(answered, f"{route} kept answering 503", timeout_s=60.0)


async def test_an_hour_of_seeded_past_at_a_point_budget(api_get: Get) -> None:
    devices = await _when_ready(api_get, "devices")
    assert devices["config"]["long_history_s"] == 86_400
    assert devices["config"]["history_bucket_s"] == 10
    body = await api_get("history", points="400", since=repr(time.time() - 3600))
    validate(body, "HistoryColumns")
    assert body["resolution_s"] == 10  # 3600 s / 400 = 9 s: one bucket
    assert 350 <= len(body["ts"]) <= 362
    util = body["series"]["gpu.1.util_pct"]
    assert len(util["mean"]) == len(body["ts"])
    for lo, mid, hi in zip(util["min"], util["mean"], util["max"], strict=True):
        if mid is not None:
            assert lo <= mid <= hi
    assert body["series"]["gpu.0.mem_used_bytes"]["max"][-1] > 0


async def test_resolution_and_limit(api_get: Get) -> None:
    await _when_ready(api_get, "devices")
    body = await api_get("history", resolution="60", limit="5")
    validate(body, "HistoryColumns")
    assert body["resolution_s"] == 60
    assert len(body["ts"]) == 5
    assert all(t % 60 == 0 for t in body["ts"])


async def test_a_fine_resolution_comes_from_the_ring(api_get: Get) -> None:
    await _when_ready(api_get, "devices")

    # The seeded past is written first, and the routes answer once its first sample is in:
    # wait for live samples (seeding took 0.2 to 0.7 s on a busy machine).
    async def live() -> bool:
        return bool(time.time() - (await api_get("snapshot"))["ts"] < 1.0)

    await wait_for_async(live, "no live sample after the seeded past", timeout_s=30.0)

    async def three_live() -> Any:
        body = await api_get("history", resolution="0.1", since=repr(time.time() - 5))
        return body if len(body["ts"]) >= 3 else None

    body = await wait_for_async(three_live, "the ring never held 3 live samples", poll_s=0.05)
    validate(body, "HistoryColumns")
    assert body["resolution_s"] == 0.1
    assert len(body["ts"]) >= 3


async def test_limit_on_samples(api_get: Get) -> None:
    await _when_ready(api_get, "devices")
    body = await api_get("history", limit="3")
    validate(body, "History")
    assert len(body["samples"]) == 3
    seqs = [s["seq"] for s in body["samples"]]
    assert seqs == sorted(seqs)


@pytest.mark.parametrize(
    ("name", "value"),
    [("resolution", "0"), ("resolution", "x"), ("points", "0"), ("points", "1.5"), ("limit", "-1")],
)
async def test_bad_arguments_are_a_400(jp_fetch: Fetch, name: str, value: str) -> None:
    with pytest.raises(tornado.httpclient.HTTPClientError) as err:
        await jp_fetch(*API, "history", params={name: value})
    assert err.value.code == 400
    assert err.value.response is not None
    body = json.loads(err.value.response.body)
    validate(body, "Error")
    assert name in body["message"]
