"""``GET metrics`` through a real server over the fake NVML: parsed by prometheus_client.

A real kernel holds (fake) GPU memory: its series appears labelled by notebook and user, and is
gone after the kernel ends. Prometheus's own scrape token opens this route and nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import tornado.httpclient
from jupyter_server.serverapp import ServerApp
from prometheus_client.parser import text_string_to_metric_families
from traitlets.config import Config

from tests.helpers import wait_for_async
from tests.integration.server.api_helpers import API, gpu_config, open_notebook
from tests.integration.server.fake_nvml_extension import ON_FAKE_NVML, fake_nvml_app

Fetch = Callable[..., Awaitable[Any]]
SCRAPE_TOKEN = "scrape-0123456789abcdef"  # a test's token


@pytest.fixture
def jp_server_config() -> Config:
    return gpu_config(**ON_FAKE_NVML, metrics_token=SCRAPE_TOKEN)


def families(body: bytes) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(body.decode())}


async def kernel_series(jp_fetch: Fetch) -> list[Any]:
    response = await jp_fetch(*API, "metrics")
    return list(families(response.body)["jupyter_gpu_kernel_memory_bytes"].samples)


async def test_a_kernels_series_is_labelled_by_notebook_and_gone_when_it_ends(
    jp_fetch: Fetch, jp_serverapp: ServerApp
) -> None:
    app = fake_nvml_app(jp_serverapp)
    session = await open_notebook(jp_fetch, "work/train.ipynb")
    kernel = jp_serverapp.kernel_manager.get_kernel(session["kernel"]["id"])
    pid = kernel.provisioner.pid
    assert pid
    app.fake.drop_ended_processes = True  # as NVML: a process that ended is not listed
    app.fake.devices[0].compute = [(pid, 3 * 2**30)]

    async def present() -> list[Any]:
        return [s for s in await kernel_series(jp_fetch) if s.labels["notebook"]]

    (series,) = await wait_for_async(present, "the kernel's series never appeared")
    assert series.labels["notebook"] == "work/train.ipynb"
    assert series.labels["user"]
    assert series.labels["gpu"] == "0"
    assert "pid" not in series.labels
    assert series.value == 3 * 2**30

    await jp_fetch("api", "sessions", session["id"], method="DELETE")

    async def gone() -> bool:
        return not await kernel_series(jp_fetch)

    await wait_for_async(gone, "the kernel's series outlived its kernel")

    # Its memory leaves the scopes when its process has exited (NVML stops listing it). Until
    # then the memory is still held, by a process no session names: on two busy CI cores one
    # scrape came between the session's end and the process's.
    async def freed() -> bool:
        body = (await jp_fetch(*API, "metrics")).body
        scopes = families(body)["jupyter_gpu_processes_memory_bytes"]
        return {s.value for s in scopes.samples if s.labels["gpu"] == "0"} == {0.0}

    await wait_for_async(freed, "the ended kernel's memory stayed in a scope")


async def test_the_scrape_token_opens_the_metrics_route_only(jp_fetch: Fetch) -> None:
    bearer = {"Authorization": f"Bearer {SCRAPE_TOKEN}"}
    response = await jp_fetch(*API, "metrics", headers=bearer)
    assert response.code == 200
    assert "DCGM_FI_DEV_FB_USED" in families(response.body)
    for route in ("devices", "snapshot", "history"):
        with pytest.raises(tornado.httpclient.HTTPClientError) as err:
            await jp_fetch(*API, route, headers=bearer)
        assert err.value.code == 403
    with pytest.raises(tornado.httpclient.HTTPClientError) as err:
        await jp_fetch("api", "contents", headers=bearer)
    assert err.value.code == 403
    for wrong in (f"Bearer {SCRAPE_TOKEN}x", f"Bearer {SCRAPE_TOKEN[:-1]}", "Bearer ", "Basic x"):
        with pytest.raises(tornado.httpclient.HTTPClientError) as err:
            await jp_fetch(*API, "metrics", headers={"Authorization": wrong})
        assert err.value.code == 403
    # Jupyter's own token still works, as on every route.
    assert (await jp_fetch(*API, "metrics")).code == 200


async def test_sampler_health_is_served(jp_fetch: Fetch) -> None:
    parsed = families((await jp_fetch(*API, "metrics")).body)
    age = parsed["jupyter_gpu_sampler_sample_age_seconds"].samples[0].value
    assert 0 <= age < 10
    assert parsed["jupyter_gpu_sampler_running"].samples[0].value == 1
    last = parsed["jupyter_gpu_sampler_last_success_timestamp_seconds"].samples[0].value
    assert abs(last - time.time()) < 10
