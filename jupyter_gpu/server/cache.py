"""``POST compile-cache/clear``: delete one torch.compile cache the server itself listed.

A request names the cache by its ``id`` (``compile_cache.dirs[].id`` of a sample), never by a
path: a body with any other field is refused (400), an id the server's last scan did not list is
404. The directory must still be the one that scan recognised (same device and inode) and must
hold only what torch writes (``jupyter_gpu.compile_cache``), else 409 with the reason, which
names what was found ("`db/data.bin`: torch does not write this"); nothing is deleted then.
What the clear left (another owner's files, a mount point, files replaced or written meanwhile)
is listed in ``failed``. Needs Jupyter's authorization for action ``write`` on ``jupyter_gpu``,
and (with cookie logins) the XSRF token that jupyter_server checks on every POST. The deletion
and the rescan after it run in a worker thread; one clear at a time.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from jupyter_gpu.compile_cache import CacheRefused, ClearResult, cache_id, clear_cache, printable
from jupyter_gpu.server.handlers import GpuApiHandler, json_body
from jupyter_gpu.server.serialize import dumps

_CLEARING = asyncio.Lock()


class CacheClearHandler(GpuApiHandler):
    """``POST compile-cache/clear`` with ``{"id": "<dirs[].id>"}``."""

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body: Any = json_body(self, '{"id": "<cache id>"}')
        if not isinstance(body, dict) or set(body) != {"id"} or not isinstance(body["id"], str):
            raise web.HTTPError(
                400,
                'Name the cache by its id only: {"id": "<compile_cache.dirs[].id of a sample>"}. '
                "Paths and other fields are refused.",
            )
        wanted = body["id"]
        sampler = self.service.sampler
        match = next((s for s in sampler.cache_sources if cache_id(s[0], s[1]) == wanted), None)
        latest = sampler.latest()
        scanned = latest.sample.compile_cache.dirs if latest is not None else ()
        seen = next((d for d in scanned if d.id == wanted), None)
        if match is None or seen is None:
            raise web.HTTPError(
                404, f"No compile cache with id {wanted[:40]!r} in this server's list."
            )
        kind, path, _source, configured = match
        shown = printable(path)  # a path need not be UTF-8; the answer and the log are text
        if seen.identity is None:  # the scan did not recognise it: say why, delete nothing
            reason = seen.refusal or "it does not exist (nothing to clear)"
            raise web.HTTPError(409, f"Not clearing {shown}: {reason}.")
        clear = functools.partial(clear_cache, kind, path, configured, expect=seen.identity)
        loop = asyncio.get_running_loop()
        async with _CLEARING:
            try:
                result: ClearResult = await loop.run_in_executor(None, clear)
            except CacheRefused as err:
                raise web.HTTPError(409, f"Not clearing {shown}: {err.reason}.") from None
            finally:
                await loop.run_in_executor(None, sampler.rescan_caches)
        self.log.info(
            "jupyter_gpu: cleared the %s cache %s (%d bytes, %d files, %d left)",
            kind,
            shown,
            result.freed_bytes,
            result.files_removed,
            len(result.failed),
        )
        await self.finish(
            dumps(
                {
                    "id": wanted,
                    "kind": kind,
                    "path": shown,
                    "freed_bytes": result.freed_bytes,
                    "files_removed": result.files_removed,
                    "failed": list(result.failed),
                }
            )
        )
