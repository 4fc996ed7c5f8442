"""The stream's bounds, through a real Jupyter server: clients over the limit are refused with a
reason, and a client that stops reading is dropped once its unsent data passes its budget.

Sixteen simulated GPUs at 0.1 s make about 100 KB of samples a second, so a client that reads
nothing fills its socket's buffers, then its 64 KiB budget, within seconds.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from jupyter_server.serverapp import ServerApp
from traitlets.config import Config

from jupyter_gpu.server.handlers import SERVICE_KEY
from jupyter_gpu.server.service import GpuService
from jupyter_gpu.server.stream import CLOSE_TOO_MANY_CLIENTS
from tests.helpers import wait_for_async
from tests.integration.server.api_helpers import API, gpu_config
from tests.integration.server.stream_clients import read_headers, silent_socket, upgrade_request

Fetch = Callable[..., Awaitable[Any]]
LIMIT = 3


@pytest.fixture
def jp_server_config() -> Config:
    return gpu_config(simulated_devices=16, max_stream_clients=LIMIT, stream_send_budget_kib=64)


@pytest.fixture
def service(jp_serverapp: ServerApp) -> GpuService:
    found: GpuService = jp_serverapp.web_app.settings[SERVICE_KEY]
    return found


@pytest.fixture
def silent(jp_serverapp: ServerApp, jp_http_port: int, jp_base_url: str) -> Iterator[Any]:
    """Opens stream clients that read nothing after the upgrade's answer; closed after."""
    opened: list[socket.socket] = []
    token = jp_serverapp.identity_provider.token

    def open_one() -> int:
        sock = silent_socket()
        opened.append(sock)
        sock.connect(("127.0.0.1", jp_http_port))
        path = f"{jp_base_url}{'/'.join(API)}/stream"
        sock.sendall(upgrade_request("127.0.0.1", jp_http_port, path, token))
        status, _ = read_headers(sock)
        return status

    yield open_one
    for sock in opened:
        sock.close()


async def first_message(ws: Any) -> dict[str, Any]:
    message = await asyncio.wait_for(ws.read_message(), 10)
    assert message is not None
    parsed: dict[str, Any] = json.loads(message)
    return parsed


async def test_a_client_over_the_limit_is_closed_with_a_reason(
    jp_ws_fetch: Fetch, service: GpuService
) -> None:
    inside = [await jp_ws_fetch(*API, "stream") for _ in range(LIMIT)]
    try:
        for ws in inside:
            assert (await first_message(ws))["type"] == "sample"
        assert service.client_count == LIMIT
        extra = await jp_ws_fetch(*API, "stream")
        assert await asyncio.wait_for(extra.read_message(), 10) is None  # closed, no sample
        assert extra.close_code == CLOSE_TOO_MANY_CLIENTS
        assert f"{LIMIT} clients at most (JupyterGpu.max_stream_clients)" in extra.close_reason
        assert len(extra.close_reason.encode()) <= 123  # what a close frame can carry
        assert service.client_count == LIMIT  # the refused one never counted
        # One leaves: its place is free again.
        inside.pop().close()
        await wait_for_async(
            lambda: asyncio.sleep(0, service.client_count == LIMIT - 1), timeout_s=10
        )
        again = await jp_ws_fetch(*API, "stream")
        inside.append(again)
        assert (await first_message(again))["type"] == "sample"
    finally:
        for ws in inside:
            ws.close()


async def test_a_client_that_stops_reading_is_dropped_and_the_others_go_on(
    jp_ws_fetch: Fetch, service: GpuService, silent: Callable[[], int]
) -> None:
    reader = await jp_ws_fetch(*API, "stream")
    try:
        await first_message(reader)
        assert await asyncio.to_thread(silent) == 101  # upgraded, then it reads nothing
        assert service.client_count == 2
        # Its unsent data passes 64 KiB within seconds: the server drops it.
        await wait_for_async(
            lambda: asyncio.sleep(0, service.client_count == 1),
            "the silent client was never dropped",
            timeout_s=60,
        )
        # The reader kept every sample, in order.
        seqs = [(await first_message(reader))["sample"]["seq"] for _ in range(5)]
        assert seqs == list(range(seqs[0], seqs[0] + 5))
    finally:
        reader.close()
