"""``POST compile-cache/clear`` on a real server: ids only, only what torch wrote, no escape.

The caches are copies of what this torch wrote when it compiled (``torch_caches``,
tests/conftest.py); the refused ones are a user's project folder and a cache with a link in it.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import tornado.httpclient
from traitlets.config import Config

from jupyter_gpu.compile_cache import scan_dir
from tests.compile_cache_reference import Reference
from tests.helpers import wait_for_async
from tests.integration.server.api_helpers import API, gpu_config, validate

# The copies here hard-link the reference's files, as does test_torch_written_caches: a name
# unlinked in one copy moves the ctime of every other name, so a clear running at that moment
# rightly leaves those files alone ("changed since it was checked"). One worker, one at a time.
pytestmark = pytest.mark.xdist_group("torch_default_links")

Fetch = Callable[..., Awaitable[Any]]
Get = Callable[..., Awaitable[Any]]

# A project folder a user set as TORCHINDUCTOR_CACHE_DIR (issue 19): names torch also uses.
PROJECT = ("ab/figure.png", "xy/run.py", "cache/results.csv", "kernel/train.py", "cpp",
           "notes.tmp.txt", "db/data.bin")  # fmt: skip


def _files(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


@pytest.fixture
def layout() -> str:
    """What TORCHINDUCTOR_CACHE_DIR is: unset (torch's default cache), or ``"project"``; or
    ``"not_utf8"``: unset, and TRITON_CACHE_DIR a folder whose name is not UTF-8."""
    return "default"


@pytest.fixture
def caches(
    layout: str, torch_caches: Reference, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Path]:
    """torch's default cache (a real one) under the server's TMPDIR, and a project folder."""
    tmpdir = tmp_path / "tmp"
    user = re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser())
    default = tmpdir / f"torchinductor_{user}"  # where this server looks: its TMPDIR's default
    shutil.copytree(torch_caches.default, default, copy_function=os.link)  # the files torch wrote
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "data.bin").write_bytes(b"d" * 7777)
    project = tmp_path / "project"
    for rel in PROJECT:
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(f"the user's {rel}")
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    if layout == "project":
        monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(project))
    else:
        monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    triton = tmp_path / "no-triton-cache"
    if layout == "not_utf8":  # a Latin-1 byte: os.environ carries it as a lone surrogate
        triton = Path(os.fsdecode(os.fsencode(tmp_path) + b"/triton-caf\xe9"))
        triton.mkdir()
    monkeypatch.setenv("TRITON_CACHE_DIR", str(triton))
    return {"inductor": default, "outside": outside, "project": project, "triton": triton}


@pytest.fixture
def jp_server_config(caches: dict[str, Path]) -> Config:
    return gpu_config(cache_scan_interval_s=1.0)


async def _all_dirs(api_get: Get) -> list[dict[str, Any]]:
    async def scanned() -> Any:
        cc = (await api_get("snapshot"))["compile_cache"]
        return cc if cc["scanned_ts"] is not None else None

    cc = await wait_for_async(scanned, "the caches were never scanned", poll_s=0.1)
    return list(cc["dirs"])


async def _dirs(api_get: Get) -> dict[str, dict[str, Any]]:
    """The first directory of each kind (a configured Inductor cache before torch's default)."""
    out: dict[str, dict[str, Any]] = {}
    for d in await _all_dirs(api_get):
        out.setdefault(d["kind"], d)
    return out


async def _post(jp_fetch: Fetch, body: Any) -> tuple[int, dict[str, Any]]:
    try:
        response = await jp_fetch(*API, "compile-cache/clear", method="POST", body=json.dumps(body))
    except tornado.httpclient.HTTPClientError as err:
        body_text = err.response.body if err.response is not None else b"{}"
        return err.code, json.loads(body_text)
    return response.code, json.loads(response.body)


async def test_torchs_real_default_cache_is_listed_clearable_and_emptied(
    jp_fetch: Fetch, api_get: Get, caches: dict[str, Path]
) -> None:
    _, size, count = scan_dir(str(caches["inductor"]))
    assert (caches["inductor"] / "precompiled_headers").is_dir()  # the 155 MB header of issue 19
    inductor = (await _dirs(api_get))["inductor"]
    validate(inductor, "CacheDir")
    assert inductor["path"] == str(caches["inductor"])
    assert (inductor["clearable"], inductor["refusal"]) == (True, None)
    assert inductor["size_bytes"] == size
    assert inductor["fs_free_bytes"] > 0
    code, body = await _post(jp_fetch, {"id": inductor["id"]})
    assert code == 200, body
    validate(body, "CacheCleared")
    # Each file is a hard link to the reference torch wrote: removing this name freed nothing.
    assert (body["freed_bytes"], body["files_removed"], body["failed"]) == (0, count, [])
    assert list(caches["inductor"].iterdir()) == []

    async def emptied() -> bool:  # rescanned right after the clear: the next samples show it
        return bool((await _dirs(api_get))["inductor"]["size_bytes"] == 0)

    await wait_for_async(emptied, "the snapshot never showed the cache emptied", poll_s=0.1)


@pytest.mark.parametrize("layout", ["project"])
async def test_a_project_folder_as_the_cache_is_refused_and_kept(
    jp_fetch: Fetch, api_get: Get, caches: dict[str, Path]
) -> None:
    before = _files(caches["project"])
    inductor = (await _dirs(api_get))["inductor"]
    assert inductor["path"] == str(caches["project"])
    reason = "`ab/figure.png`: torch does not write this"
    assert (inductor["clearable"], inductor["refusal"]) == (False, reason)
    code, body = await _post(jp_fetch, {"id": inductor["id"]})
    assert code == 409
    assert body["message"] == f"Not clearing {caches['project']}: {reason}."
    assert _files(caches["project"]) == before
    # torch's default directory, where it still put the precompiled headers, stays in view.
    inductors = [d for d in await _all_dirs(api_get) if d["kind"] == "inductor"]
    assert [d["path"] for d in inductors] == [str(caches["project"]), str(caches["inductor"])]
    assert (inductors[1]["clearable"], inductors[1]["refusal"]) == (True, None)


async def test_a_link_inside_refuses_the_cache_and_is_never_followed(
    jp_fetch: Fetch, api_get: Get, caches: dict[str, Path]
) -> None:
    (caches["inductor"] / "locks" / "escape.lock").symlink_to(caches["outside"] / "data.bin")

    async def refused() -> Any:  # the next scan (every second) sees the link
        inductor = (await _dirs(api_get))["inductor"]
        return None if inductor["clearable"] else inductor

    inductor = await wait_for_async(refused, "the link was never seen", poll_s=0.1)
    assert inductor["refusal"].startswith("`locks/escape.lock`: a symbolic link")
    files = scan_dir(str(caches["inductor"]))[2]
    code, body = await _post(jp_fetch, {"id": inductor["id"]})
    assert code == 409
    assert "`locks/escape.lock`: a symbolic link" in body["message"]
    assert (caches["outside"] / "data.bin").read_bytes() == b"d" * 7777
    assert scan_dir(str(caches["inductor"]))[2] == files


async def test_paths_and_unknown_ids_are_refused(
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


@pytest.mark.parametrize("layout", ["not_utf8"])
async def test_a_cache_path_that_is_not_utf8_refuses_only_that_cache(
    jp_fetch: Fetch, api_get: Get, caches: dict[str, Path]
) -> None:
    dirs = await _dirs(api_get)  # scanned at all: one bad path used to stop every scan
    triton = dirs["triton"]
    assert triton["path"] == str(caches["triton"]).encode("utf-8", "surrogateescape").decode(
        "utf-8", "replace"
    )
    assert triton["path"].endswith("/triton-caf\ufffd")
    assert not triton["clearable"]
    assert triton["refusal"].startswith("its path is not UTF-8 text (the byte 0xe9 at character")
    code, body = await _post(jp_fetch, {"id": triton["id"]})
    assert code == 409
    assert "is not UTF-8 text" in body["message"]
    assert caches["triton"].is_dir()
    inductor = dirs["inductor"]  # the other caches are listed and cleared as usual
    assert (inductor["clearable"], inductor["refusal"]) == (True, None)
    count = scan_dir(str(caches["inductor"]))[2]
    code, body = await _post(jp_fetch, {"id": inductor["id"]})
    assert code == 200, body
    assert (body["files_removed"], body["failed"]) == (count, [])
