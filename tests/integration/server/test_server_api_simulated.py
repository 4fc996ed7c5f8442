"""The API against a real Jupyter server with the simulated backend, under a non-root base URL.

Every response is checked against jupyter_gpu/server/openapi.yaml.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import tornado.httpclient
from jupyter_server.serverapp import ServerApp
from prometheus_client.parser import text_string_to_metric_families

from jupyter_gpu.server.app import JupyterGpuApp
from jupyter_gpu.server.handlers import GZIP_MIN_BYTES
from jupyter_gpu.server.openapi import openapi_json
from tests.helpers import wait_for_async
from tests.integration.server.api_helpers import API, openapi, validate

Get = Callable[..., Awaitable[Any]]
Fetch = Callable[..., Awaitable[Any]]
ROUTES = ("devices", "snapshot", "history", "metrics", "openapi.json")


async def samples_in_history(api_get: Get, count: int) -> Any:
    """``GET history`` once it holds at least ``count`` samples (a sample each 0.1 s)."""

    async def enough() -> Any:
        history = await api_get("history")
        return history if len(history["samples"]) >= count else None

    return await wait_for_async(enough, f"history never held {count} samples", poll_s=0.05)


async def test_base_url_is_not_root(jp_base_url: str) -> None:
    assert jp_base_url != "/"  # the routes below are found under it


async def test_devices_says_simulated(api_get: Get) -> None:
    body = await api_get("devices")
    validate(body, "Devices")
    assert (body["backend"], body["simulated"], body["gpu_available"]) == ("simulated", True, True)
    assert body["reason"] is None
    assert [d["index"] for d in body["devices"]] == [0, 1, 2]
    assert all(d["name"].startswith("Simulated") for d in body["devices"])
    assert body["config"]["interval_s"] == 0.1
    assert body["config"]["requested_backend"] == "simulated"
    assert body["config"]["gpm_metrics"] is True


async def test_kernels_of_a_simulated_server_use_it_too(api_get: Get) -> None:
    import os

    await api_get("devices")
    # Kernels inherit the server's environment: %gpu in them reads this (restored at stop).
    assert os.environ.get("JUPYTER_GPU_BACKEND") == "simulated"
    assert os.environ.get("JUPYTER_GPU_SIMULATED_DEVICES") == "3"


async def test_snapshot_has_gpm_activity(api_get: Get) -> None:
    async def with_gpm() -> Any:
        sample = await api_get("snapshot")
        return sample if sample["devices"][0]["sm_active_pct"] is not None else None

    sample = await wait_for_async(with_gpm, "no GPM reading reached the snapshot", poll_s=0.05)
    d = sample["devices"][0]
    for key in ("sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_bw_pct"):
        assert 0 <= d[key] <= 100


async def test_snapshot_is_the_latest_sample(api_get: Get) -> None:
    first = await api_get("snapshot")
    validate(first, "Sample")
    assert (first["backend"], first["simulated"]) == ("simulated", True)
    assert len(first["devices"]) == 3
    assert first["host"]["mem_total_bytes"] > 0

    async def newer() -> Any:
        later = await api_get("snapshot")
        return later if later["seq"] > first["seq"] else None

    later = await wait_for_async(newer, "the snapshot never moved on", poll_s=0.05)
    assert later["ts"] > first["ts"]


@pytest.mark.parametrize("route", ["snapshot", "history"])
async def test_responses_are_not_cached_and_not_hashed(jp_fetch: Fetch, route: str) -> None:
    response = await jp_fetch(*API, route)
    assert response.headers["Cache-Control"] == "no-store"
    assert "Etag" not in response.headers  # no per-request hash of a body that changes anyway


async def test_history_filters_by_since(api_get: Get) -> None:
    everything = await samples_in_history(api_get, 3)
    validate(everything, "History")
    assert everything["interval_s"] == 0.1
    samples = everything["samples"]
    assert len(samples) >= 3
    seqs = [s["seq"] for s in samples]
    assert seqs == sorted(seqs)
    cut = samples[1]["ts"]
    after = await api_get("history", since=repr(cut))
    assert after["samples"]
    assert all(s["ts"] > cut for s in after["samples"])
    assert after["samples"][0]["seq"] == samples[2]["seq"]
    future = await api_get("history", since=str(time.time() + 3600))
    assert future["samples"] == []


async def test_a_long_history_is_sent_gzipped(jp_fetch: Fetch) -> None:
    async def long_enough() -> bool:  # the route sends a short body as it is
        plain = await jp_fetch(*API, "history", decompress_response=False)
        return len(plain.body) >= GZIP_MIN_BYTES

    await wait_for_async(long_enough, "the history never grew past gzip's minimum", poll_s=0.05)
    response = await jp_fetch(*API, "history", headers={"Accept-Encoding": "gzip"})
    # tornado's client decompresses, and says what it undid
    assert response.headers.get("X-Consumed-Content-Encoding") == "gzip"
    assert len(json.loads(response.body)["samples"]) >= 3
    plain = await jp_fetch(*API, "history", decompress_response=False)
    assert "Content-Encoding" not in plain.headers  # the client did not ask for gzip
    validate(json.loads(plain.body), "History")


# "two days ahead" is worked out when the test runs: a value computed at collection would differ
# between pytest-xdist's workers, which then refuse to run (they must collect the same tests).
@pytest.mark.parametrize(
    "since", ["banana", "-1", "nan", "inf", "-inf", "1e300", "", "two days ahead"]
)
async def test_bad_since_is_a_400_with_a_message(jp_fetch: Fetch, since: str) -> None:
    if since == "two days ahead":
        since = str(time.time() + 2 * 86400)
    with pytest.raises(tornado.httpclient.HTTPClientError) as err:
        await jp_fetch(*API, "history", params={"since": since})
    assert err.value.code == 400
    assert err.value.response is not None
    body = json.loads(err.value.response.body)
    validate(body, "Error")
    assert "since" in body["message"]


@pytest.mark.parametrize("route", ROUTES)
async def test_every_route_is_403_without_credentials(jp_fetch: Fetch, route: str) -> None:
    with pytest.raises(tornado.httpclient.HTTPClientError) as err:
        await jp_fetch(*API, route, headers={"Authorization": ""})
    assert err.value.code == 403


@pytest.mark.parametrize("token", ["", "token not-the-token"])
async def test_the_stream_is_403_without_credentials(jp_ws_fetch: Fetch, token: str) -> None:
    with pytest.raises(tornado.httpclient.HTTPClientError) as err:
        await jp_ws_fetch(*API, "stream", headers={"Authorization": token})
    assert err.value.code == 403


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
async def test_nothing_changes_state(jp_fetch: Fetch, method: str) -> None:
    with pytest.raises(tornado.httpclient.HTTPClientError) as err:
        await jp_fetch(*API, "snapshot", method=method, body=None if method == "DELETE" else "{}")
    assert err.value.code == 405


async def test_the_stream_delivers_every_new_sample(jp_ws_fetch: Fetch) -> None:
    ws = await jp_ws_fetch(*API, "stream")
    try:
        messages = []
        for _ in range(5):
            raw = await asyncio.wait_for(ws.read_message(), timeout=5)
            assert isinstance(raw, str)
            messages.append(json.loads(raw))
    finally:
        ws.close()
    for message in messages:
        validate(message, "StreamMessage")
        assert message["sample"]["simulated"] is True
    seqs = [m["sample"]["seq"] for m in messages]
    # the first is the latest at connect time; each next one is the next tick, none skipped
    assert seqs == list(range(seqs[0], seqs[0] + 5))


async def test_two_clients_get_the_same_samples_from_one_sampler(
    jp_ws_fetch: Fetch, jp_serverapp: ServerApp
) -> None:
    a = await jp_ws_fetch(*API, "stream")
    b = await jp_ws_fetch(*API, "stream")
    try:
        await asyncio.wait_for(a.read_message(), 5)  # the latest on connect
        await asyncio.wait_for(b.read_message(), 5)
        got_a = [await asyncio.wait_for(a.read_message(), 5) for _ in range(3)]
        got_b = [await asyncio.wait_for(b.read_message(), 5) for _ in range(3)]
        service = jp_serverapp.web_app.settings["jupyter_gpu_service"]
        assert service.client_count == 2
    finally:
        a.close()
        b.close()
    seqs_a = [json.loads(m)["sample"]["seq"] for m in got_a]
    seqs_b = [json.loads(m)["sample"]["seq"] for m in got_b]
    assert set(seqs_a) & set(seqs_b)  # the same ticks, not one sampler per client
    samplers = [t for t in threading.enumerate() if t.name == "jupyter-gpu-sampler"]
    assert len(samplers) == 1


async def test_metrics_are_prometheus_text_with_dcgm_names(jp_fetch: Fetch) -> None:
    response = await jp_fetch(*API, "metrics")
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(response.body.decode())}
    util = families["DCGM_FI_DEV_GPU_UTIL"].samples
    assert len(util) == 3
    assert util[0].labels["modelName"] == "Simulated NVIDIA H200"
    assert util[0].labels["gpu"] == "0"
    assert families["DCGM_FI_DEV_FB_USED"].type == "gauge"
    (info,) = families["jupyter_gpu_info"].samples
    assert (info.labels["backend"], info.labels["simulated"]) == ("simulated", "true")
    assert families["jupyter_gpu_host_memory_total_bytes"].samples[0].value > 0


async def test_the_openapi_document_is_served(api_get: Get) -> None:
    served = await api_get("openapi.json")
    assert served == openapi()
    assert json.loads(openapi_json())["openapi"] == "3.1.0"
    documented = {p.strip("/") for p in served["paths"]}
    # POST-only routes, tested in their own modules
    assert documented == {*ROUTES, "stream", "compile-cache/clear", "tutorials"}


async def test_monitoring_is_not_user_activity(jp_fetch: Fetch, jp_serverapp: ServerApp) -> None:
    settings = jp_serverapp.web_app.settings
    settings.pop("api_last_activity", None)
    await jp_fetch(*API, "snapshot")
    assert "api_last_activity" not in settings


async def test_seq_counts_every_sample_by_one_from_one(api_get: Get) -> None:
    seqs = [s["seq"] for s in (await samples_in_history(api_get, 3))["samples"]]
    # a fresh server (each test has one) starts again from 1, and there is no gap
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(seqs) >= 3


async def test_the_extension_is_an_extension_app(jp_serverapp: ServerApp) -> None:
    (app,) = jp_serverapp.extension_manager.extension_apps["jupyter_gpu"]
    assert isinstance(app, JupyterGpuApp)
    settings = jp_serverapp.web_app.settings
    assert settings["jupyter_gpu"] is app  # ExtensionApp keeps itself there, by name
    assert app.service is not None
    assert settings["jupyter_gpu_service"] is app.service
    assert app.service.sampler.running


async def test_the_sampler_stops_with_the_server(jp_fetch: Fetch, jp_serverapp: ServerApp) -> None:
    await jp_fetch(*API, "snapshot")
    assert [t for t in threading.enumerate() if t.name.startswith("jupyter-gpu")]
    (app,) = jp_serverapp.extension_manager.extension_apps["jupyter_gpu"]
    sampler = app.service.sampler
    stopped_in: list[threading.Thread] = []
    stop = sampler.stop

    def recording_stop(timeout: float = 5.0) -> None:
        stopped_in.append(threading.current_thread())
        stop(timeout)

    sampler.stop = recording_stop  # type: ignore[method-assign]
    await jp_serverapp.cleanup_extensions()  # awaits JupyterGpuApp.stop_extension
    assert not [t for t in threading.enumerate() if t.name.startswith("jupyter-gpu")]
    # It joins threads: never on the event loop (this coroutine's thread).
    assert stopped_in
    assert stopped_in[0] is not threading.current_thread()
