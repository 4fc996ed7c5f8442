"""The API in its other states: no GPU, faults from a fake NVML, invalid config, kernels."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import tornado.httpclient
from jupyter_server.serverapp import ServerApp
from traitlets.config import Config

from tests.helpers import wait_for_async
from tests.integration.server.api_helpers import API, gpu_config, open_notebook, validate
from tests.integration.server.fake_nvml_extension import ON_FAKE_NVML, fake_nvml_app

Get = Callable[..., Awaitable[Any]]
Fetch = Callable[..., Awaitable[Any]]


@pytest.fixture
def jp_server_config(request: pytest.FixtureRequest) -> Config:
    """Per test: ``@pytest.mark.gpu_config(**options)``, or the extension left off (None)."""
    marker = request.node.get_closest_marker("gpu_config")
    if marker is None:
        return Config({"ServerApp": {"jpserver_extensions": {"jupyter_gpu": False}}})
    return gpu_config(**marker.kwargs)


@pytest.mark.gpu_config(backend="none")
async def test_none_backend_says_why_and_serves_host_metrics(api_get: Get) -> None:
    devices = await api_get("devices")
    validate(devices, "Devices")
    assert (devices["backend"], devices["gpu_available"], devices["devices"]) == ("none", False, [])
    assert devices["reason"] == "GPU monitoring is switched off (backend 'none')"
    snapshot = await api_get("snapshot")
    validate(snapshot, "Sample")
    assert snapshot["reason"] == devices["reason"]
    assert snapshot["devices"] == []
    assert snapshot["host"]["mem_total_bytes"] > 0


@pytest.mark.gpu_config(backend="auto")
async def test_auto_without_nvml_is_none_with_nvmls_reason(api_get: Get) -> None:
    devices = await api_get("devices")
    if devices["backend"] == "nvml":
        pytest.skip("this machine has a working NVML")
    assert devices["backend"] == "none"
    assert devices["simulated"] is False  # auto never falls back to simulated
    assert devices["reason"] == "NVML Shared Library Not Found"


INVALID = {
    "interval": ({"interval_s": 0.01}, ("interval_s", "0.1")),
    "fault spec": ({"simulated_faults": ["lost:one"]}, ("simulated_faults", "lost:<gpu>")),
    "fault device": ({"simulated_faults": ["lost:3"]}, ("'lost:3' is on GPU 3", "0 to 2")),
}


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=pytest.mark.gpu_config(**INVALID[c][0]), id=c) for c in INVALID],
)
async def test_invalid_config_answers_503_naming_the_option(jp_fetch: Fetch, case: str) -> None:
    for route in ("devices", "snapshot", "stream"):
        with pytest.raises(tornado.httpclient.HTTPClientError) as err:
            await jp_fetch(*API, route)
        assert err.value.code == 503
        assert err.value.response is not None
        message = json.loads(err.value.response.body)["message"]
        assert "invalid configuration" in message
        for words in INVALID[case][1]:
            assert words in message


@pytest.mark.gpu_config(**ON_FAKE_NVML)
async def test_faults_reach_the_api_as_states(
    jp_serverapp: ServerApp, api_get: Get, jp_fetch: Fetch, jp_ws_fetch: Fetch
) -> None:
    app = fake_nvml_app(jp_serverapp)
    fake, service = app.fake, app.service
    assert service is not None
    devices = await api_get("devices")
    validate(devices, "Devices")
    assert (devices["backend"], devices["simulated"]) == ("nvml", False)
    assert devices["driver_version"] == "580.159.04"

    snapshot = await api_get("snapshot")
    validate(snapshot, "Sample")
    d0, d1 = snapshot["devices"]
    assert d0["power_w"] == 300.0
    assert d1["power_w"] is None
    assert d1["unavailable"] == {"power_w": "Not Supported"}

    ws = await jp_ws_fetch(*API, "stream")
    try:
        fake.lose(0)
        deadline = time.monotonic() + 5
        while True:
            message = json.loads(await asyncio.wait_for(ws.read_message(), 5))
            if message["sample"]["devices"][0]["state"] == "lost":
                break
            assert time.monotonic() < deadline
    finally:
        ws.close()
    validate(message, "StreamMessage")
    lost, alive = message["sample"]["devices"]
    assert lost["error"].startswith("NVML reports this GPU as lost")
    assert alive["state"] == "ok"
    assert service.sampler.running  # sampling goes on

    async def gpu_0_not_ok() -> bool:  # in the metrics of a sample after the loss
        metrics = (await jp_fetch(*API, "metrics")).body.decode().splitlines()
        return any(
            m.startswith("jupyter_gpu_device_ok{") and 'gpu="0"' in m and m.endswith(" 0.0")
            for m in metrics
        )

    await wait_for_async(gpu_0_not_ok, "the metrics never said GPU 0 is not ok", poll_s=0.05)


@pytest.mark.gpu_config(simulated_devices=2)
async def test_gpu_processes_are_attributed_to_their_kernel_and_notebook(
    jp_fetch: Fetch, api_get: Get
) -> None:
    # The simulated backend reports this server's kernel processes as GPU processes, so the
    # pid -> kernel map built on the event loop is exercised end to end with a real kernel.
    kernel_id = (await open_notebook(jp_fetch, "work/train.ipynb"))["kernel"]["id"]

    async def listed() -> Any:
        snapshot = await api_get("snapshot")
        procs = [p for d in snapshot["devices"] for p in d["processes"]]
        return (snapshot, procs) if procs else None

    snapshot, procs = await wait_for_async(
        listed, "the kernel never showed up as a GPU process", timeout_s=20
    )
    validate(snapshot, "Sample")
    (proc,) = procs
    assert (proc["kernel_id"], proc["notebook"]) == (kernel_id, "work/train.ipynb")
    assert proc["name"] is not None
