"""The API's responses, byte for byte, against golden files: a refactor must not change them.

A real Jupyter server serves them through the real handlers, service, sampler and serialisation;
only what would vary from run to run stands still (``golden_extension.py``: the clocks, a
seeded simulated backend read in one order, a fixed cgroup tree, no compile caches). The test
ticks the sampler itself, moving the clock between ticks, then fetches every route once and
reads one stream message.

The files are in ``golden/`` beside this test. After a change that is meant to change a
response, regenerate them, and read the diff before committing it::

    JUPYTER_GPU_UPDATE_GOLDEN=1 python -m pytest tests/integration/server/test_api_golden.py

Two facts of the machine are written as placeholders: its host name (``golden-host``) and the
package's version (``0.0.0-golden``), so that the files hold on any machine and release.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from jupyter_server.serverapp import ServerApp
from traitlets.config import Config

import jupyter_gpu
from tests.helpers import wait_for_async
from tests.integration.server.api_helpers import API, gpu_config
from tests.integration.server.golden_extension import RIG, GoldenGpuApp

Fetch = Callable[..., Awaitable[Any]]
GOLDEN = Path(__file__).with_name("golden")
UPDATE = os.environ.get("JUPYTER_GPU_UPDATE_GOLDEN") == "1"
TICKS = 5
TICK_S = 0.5
AGE_S = 0.25  # how long after the last tick the routes are read


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Config:
    RIG.freeze(monkeypatch, tmp_path)
    # Cadences longer than the test: the sampler's own threads read once, at start, and the
    # test makes every later tick itself.
    return gpu_config(
        extension="tests.integration.server.golden_extension",
        interval_s=60.0,
        history_s=3_600.0,
        gpm_interval_s=60.0,
        slow_metrics=True,
        slow_interval_s=3_600.0,
        cache_scan_interval_s=86_400.0,
        kernel_map_interval_s=300.0,
    )


def machine_neutral(body: str) -> str:
    """``body`` with this machine's host name and the package's version as placeholders."""
    host = socket.gethostname()
    version = jupyter_gpu.__version__
    for before, after in (
        (f'"hostname":{json.dumps(host)}', '"hostname":"golden-host"'),
        (f'Hostname="{host}"', 'Hostname="golden-host"'),
        (f'"jupyter_gpu_version":{json.dumps(version)}', '"jupyter_gpu_version":"0.0.0-golden"'),
    ):
        body = body.replace(before, after)
    return body


def readable(text: str) -> list[str]:
    """Lines to diff: JSON indented (a body is one line), other text as it is."""
    try:
        return json.dumps(json.loads(text), indent=1).splitlines()
    except ValueError:
        return text.splitlines()


def check(name: str, body: str) -> None:
    """``body`` is byte for byte the golden file ``name`` (or becomes it, when updating)."""
    path = GOLDEN / name
    got = machine_neutral(body).encode()
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(got)
        return
    want = path.read_bytes()
    if got != want:
        diff = difflib.unified_diff(
            readable(want.decode()), readable(got.decode()), "golden", "now", lineterm=""
        )
        pytest.fail(f"{name} is not the golden file:\n" + "\n".join(list(diff)[:80]))


async def test_every_response_is_the_golden_one(
    jp_serverapp: ServerApp, jp_fetch: Fetch, jp_ws_fetch: Fetch
) -> None:
    app = jp_serverapp.extension_manager.extension_points["jupyter_gpu"].app
    assert isinstance(app, GoldenGpuApp)
    assert app.service is not None
    sampler = app.service.sampler
    devices = app.service.config.simulated_devices

    async def started() -> bool:
        # At clock 0: the sampler thread's first tick, its first GPM and PCIe rounds, the scan.
        return (
            sampler.latest() is not None
            and sampler.cache_scan_duration_s is not None
            and len(sampler.group_answers("gpm")) == devices
            and len(sampler.group_answers("pcie")) == devices
        )

    await wait_for_async(started, "the sampler never read its first round")
    first = sampler.latest()
    assert first is not None
    # The first tick raced the rounds (it may or may not have their readings): it is left out.
    for _ in range(TICKS):
        RIG.clock.advance(TICK_S)
        assert await asyncio.to_thread(sampler.tick) is not None
    RIG.clock.advance(AGE_S)
    latest = sampler.latest()
    assert latest is not None
    # The sampler thread ticks again only after interval_s (60 s) of real time.
    assert latest.sample.seq == first.sample.seq + TICKS, "the sampler thread ticked by itself"

    async def get(route: str, **params: str) -> str:
        response = await jp_fetch(*API, route, params=params or None)
        assert response.code == 200
        body: str = response.body.decode()
        return body

    since = repr(first.sample.ts)
    check("devices.json", await get("devices"))
    check("snapshot.json", await get("snapshot"))
    check("history.json", await get("history", since=since))
    check("history_columns.json", await get("history", since=since, resolution="1"))
    check("metrics.txt", await get("metrics"))  # before the stream: it counts stream clients
    check("openapi.json", await get("openapi.json"))
    ws = await jp_ws_fetch(*API, "stream")
    try:
        message = await asyncio.wait_for(ws.read_message(), timeout=10)
    finally:
        ws.close()
    assert isinstance(message, str)
    check("stream_message.json", message)
    assert sampler.latest() is latest  # nothing ticked while the routes were read
