"""``POST compile-cache/clear``: delete one torch.compile cache the server itself listed.

A request names the cache by its ``id`` (``compile_cache.dirs[].id`` of a sample), never by a
path: a body with any other field is refused (400), an id the server's last scan did not list is
404. The directory must still validate as an Inductor or Triton cache
(``jupyter_gpu.sampling.cache_admin.cache_refusal``), else 409 with the reason. Needs Jupyter's
authorization for action ``write`` on ``jupyter_gpu``, and (with cookie logins) the XSRF token
that jupyter_server checks on every POST. The deletion and the rescan after it run in a worker
thread; one clear at a time.
"""

from __future__ import annotations

import asyncio
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from jupyter_gpu.sampling.cache_admin import ClearResult, cache_id, clear_cache
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
        if match is None:
            raise web.HTTPError(
                404, f"No compile cache with id {wanted[:40]!r} in this server's list."
            )
        kind, path, _source, configured = match
        loop = asyncio.get_running_loop()
        async with _CLEARING:
            try:
                result: ClearResult = await loop.run_in_executor(
                    None, clear_cache, kind, path, configured
                )
            except PermissionError as err:
                raise web.HTTPError(409, str(err)) from None
            await loop.run_in_executor(None, sampler.rescan_caches)
        self.log.info(
            "jupyter_gpu: cleared the %s cache %s (%d bytes, %d files)",
            kind,
            path,
            result.freed_bytes,
            result.files_removed,
        )
        await self.finish(
            dumps(
                {
                    "id": wanted,
                    "kind": kind,
                    "path": path,
                    "freed_bytes": result.freed_bytes,
                    "files_removed": result.files_removed,
                    "failed": list(result.failed),
                }
            )
        )
