"""Each reading's age, and a stale one left out, through a real Jupyter server (fake NVML).

GPU 0's GPM and PCIe calls hang while its fast reads go on: the API must say so (those fields
``null``, their age, ``stale`` naming them), ``GET metrics`` must leave those series out, and
GPU 1 must go on as before. Checked against the OpenAPI schema on the real responses.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from jupyter_server.serverapp import ServerApp
from prometheus_client.parser import text_string_to_metric_families
from traitlets.config import Config

from jupyter_gpu.sampling.freshness import StaleAfter
from tests.helpers import wait_for_async
from tests.integration.server.api_helpers import API, gpu_config, validate
from tests.integration.server.fake_nvml_extension import ON_FAKE_NVML, fake_nvml_app

Get = Callable[..., Awaitable[Any]]
Fetch = Callable[..., Awaitable[Any]]
GPM_INTERVAL_S = 0.1
SLOW_INTERVAL_S = 1.0  # the least the option allows
STALE = StaleAfter.two_intervals({"fast": 0.1, "gpm": GPM_INTERVAL_S, "pcie": SLOW_INTERVAL_S})


@pytest.fixture
def jp_server_config() -> Config:
    return gpu_config(
        **ON_FAKE_NVML,
        gpm_interval_s=GPM_INTERVAL_S,
        slow_metrics=True,
        slow_interval_s=SLOW_INTERVAL_S,
        read_deadline_s=0.5,
    )


async def series_gpus(jp_fetch: Fetch) -> dict[str, set[str]]:
    """``GET metrics``: each DCGM family's ``gpu`` labels."""
    body = (await jp_fetch(*API, "metrics")).body.decode()
    return {
        f.name: {s.labels["gpu"] for s in f.samples}
        for f in text_string_to_metric_families(body)
        if f.name.startswith("DCGM_FI_")
    }


async def test_a_stale_reading_is_null_with_its_age_and_absent_from_metrics(
    jp_serverapp: ServerApp, api_get: Get, jp_fetch: Fetch
) -> None:
    fake = fake_nvml_app(jp_serverapp).fake

    async def live() -> Any:
        snapshot = await api_get("snapshot")
        d0 = snapshot["devices"][0]
        return snapshot if d0["sm_active_pct"] and d0["pcie_tx_bytes_per_s"] else None

    snapshot = await wait_for_async(live, "GPM and PCIe readings never came")
    validate(snapshot, "Snapshot")
    d0 = snapshot["devices"][0]
    for key, limit in (("read_age_s", STALE.limit_s("fast")), ("gpm_age_s", STALE.limit_s("gpm"))):
        assert 0 <= d0[key] <= limit, (key, d0)
    assert 0 <= d0["pcie_age_s"] <= STALE.limit_s("pcie")
    assert d0["stale"] == []
    gpus = await series_gpus(jp_fetch)
    assert gpus["DCGM_FI_PROF_SM_ACTIVE"] == gpus["DCGM_FI_PROF_PCIE_TX_BYTES"] == {"0", "1"}

    # GPU 0's GPM and PCIe calls hang; its fast reads (and all of GPU 1's) go on.
    fake.hang(0, calls={"nvmlGpmSampleGet", "nvmlDeviceGetPcieThroughput"})
    try:

        async def stale() -> Any:
            snapshot = await api_get("snapshot")
            return snapshot if snapshot["devices"][0]["stale"] == ["gpm", "pcie"] else None

        snapshot = await wait_for_async(stale, "GPU 0's GPM and PCIe never turned stale")
        validate(snapshot, "Snapshot")
        d0, d1 = snapshot["devices"]
        assert d0["state"] == "ok"
        assert d0["util_pct"] == 50.0  # the fast readings are live
        assert d0["read_age_s"] <= STALE.limit_s("fast")
        for field in ("sm_active_pct", "tensor_active_pct", "pcie_tx_bytes_per_s"):
            assert d0[field] is None, field
        assert d0["gpm_age_s"] > STALE.limit_s("gpm")
        assert d0["pcie_age_s"] > STALE.limit_s("pcie")
        assert d1["stale"] == []
        assert d1["sm_active_pct"] == 78.0
        history = await api_get("history")
        validate(history, "History")
        gpus = await series_gpus(jp_fetch)
        assert gpus["DCGM_FI_PROF_SM_ACTIVE"] == {"1"}  # GPU 0's series is left out
        assert gpus["DCGM_FI_PROF_PCIE_TX_BYTES"] == {"1"}
        assert gpus["DCGM_FI_DEV_GPU_UTIL"] == {"0", "1"}
    finally:
        fake.release(0)
    await wait_for_async(
        lambda: _fresh_again(api_get), "GPU 0's readings never came back", timeout_s=15.0
    )


async def _fresh_again(api_get: Get) -> bool:
    d0 = (await api_get("snapshot"))["devices"][0]
    return bool(d0["stale"] == [] and d0["sm_active_pct"] == 78.0)
