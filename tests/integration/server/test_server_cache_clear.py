"""``POST compile-cache/clear`` on a real server: ids only, validation, bytes freed, no escape."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import tornado.httpclient
from traitlets.config import Config

from tests.integration.server.api_helpers import API, gpu_config, validate

Fetch = Callable[..., Awaitable[Any]]
Get = Callable[..., Awaitable[Any]]


@pytest.fixture
def caches(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("caches")
    inductor = root / "torchinductor_test"
    (inductor / "fxgraph" / "ab").mkdir(parents=True)
    (inductor / "fxgraph" / "ab" / "graph").write_bytes(b"g" * 4096)
    (inductor / "xy").mkdir()
    (inductor / "xy" / "cxy.py").write_bytes(b"p" * 1000)
    outside = root / "precious"
    outside.mkdir()
    (outside / "data.bin").write_bytes(b"d" * 7777)
    (inductor / "zz").symlink_to(outside, target_is_directory=True)  # an escape attempt
    triton = root / "not_a_cache"
    triton.mkdir()
    (triton / "notes.txt").write_text("mine")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(inductor))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(triton))
    return {"inductor": inductor, "outside": outside, "triton": triton}


@pytest.fixture
def jp_server_config(caches: dict[str, Path]) -> Config:
    return gpu_config(cache_scan_interval_s=1.0)


async def _dirs(api_get: Get) -> dict[str, dict[str, Any]]:
    for _ in range(100):
        cc = (await api_get("snapshot"))["compile_cache"]
        if cc["scanned_ts"] is not None:
            return {d["kind"]: d for d in cc["dirs"]}
        await asyncio.sleep(0.1)
    raise AssertionError("the caches were never scanned")


async def _post(jp_fetch: Fetch, body: Any) -> tuple[int, dict[str, Any]]:
    try:
        response = await jp_fetch(*API, "compile-cache/clear", method="POST", body=json.dumps(body))
    except tornado.httpclient.HTTPClientError as err:
        body_text = err.response.body if err.response is not None else b"{}"
        return err.code, json.loads(body_text)
    return response.code, json.loads(response.body)


async def test_clear_by_id_frees_the_bytes_and_never_the_symlink_target(
    jp_fetch: Fetch, api_get: Get, caches: dict[str, Path]
) -> None:
    dirs = await _dirs(api_get)
    inductor = dirs["inductor"]
    validate(inductor, "CacheDir")
    assert inductor["clearable"]
    assert inductor["size_bytes"] == 4096 + 1000
    assert inductor["fs_free_bytes"] > 0
    code, body = await _post(jp_fetch, {"id": inductor["id"]})
    assert code == 200, body
    validate(body, "CacheCleared")
    assert body["freed_bytes"] == 4096 + 1000
    assert body["files_removed"] == 2
    assert (caches["outside"] / "data.bin").read_bytes() == b"d" * 7777
    assert list(caches["inductor"].iterdir()) == []
    for _ in range(30):  # rescanned right after the clear: the next samples show it
        after = await _dirs(api_get)
        if after["inductor"]["size_bytes"] == 0:
            break
        await asyncio.sleep(0.1)
    assert after["inductor"]["size_bytes"] == 0


async def test_paths_unknown_ids_and_non_caches_are_refused(
    jp_fetch: Fetch, api_get: Get, caches: dict[str, Path]
) -> None:
    dirs = await _dirs(api_get)
    code, body = await _post(jp_fetch, {"path": str(caches["outside"])})
    assert code == 400
    assert "id only" in body["message"]
    code, _ = await _post(jp_fetch, {"id": dirs["inductor"]["id"], "path": "/"})
    assert code == 400
    code, _ = await _post(jp_fetch, {"id": "0123456789ab"})
    assert code == 404
    triton = dirs["triton"]
    assert not triton["clearable"]
    assert "notes.txt" in triton["refusal"]
    code, body = await _post(jp_fetch, {"id": triton["id"]})
    assert code == 409
    assert "notes.txt" in body["message"]
    assert (caches["triton"] / "notes.txt").exists()
    assert (caches["outside"] / "data.bin").exists()


async def test_clear_needs_credentials(jp_fetch: Fetch, api_get: Get) -> None:
    dirs = await _dirs(api_get)
    with pytest.raises(tornado.httpclient.HTTPClientError) as err:
        await jp_fetch(
            *API,
            "compile-cache/clear",
            method="POST",
            body=json.dumps({"id": dirs["inductor"]["id"]}),
            headers={"Authorization": ""},
        )
    assert err.value.code == 403
