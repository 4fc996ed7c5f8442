"""REST handlers of ``/jupyter-gpu/api/v1/``: authenticate, read the sampler, serialise.

Every route needs Jupyter's authentication (403 without it) and authorization (resource
``jupyter_gpu``, action ``read``). None of them counts as user activity, so an open GPU panel
does not keep an idle server from being culled.
"""

from __future__ import annotations

import asyncio
import gzip
import hmac
import math
import time
from typing import Any

from jupyter_server.auth import User
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from jupyter_gpu.sampling.columns import ColumnsQuery
from jupyter_gpu.server.metrics import PROMETHEUS_CONTENT_TYPE
from jupyter_gpu.server.openapi import openapi_json
from jupyter_gpu.server.serialize import dumps, history_body, snapshot_body
from jupyter_gpu.server.service import GpuService

AUTH_RESOURCE = "jupyter_gpu"
SERVICE_KEY = "jupyter_gpu_service"
"""Where the ``GpuService`` lives in the web app's settings (``ExtensionApp`` keeps itself under
``"jupyter_gpu"``, its name)."""
SCRAPER_NAME = "jupyter-gpu-metrics-scraper"
"""The user name a request with the scrape token is logged as."""
MAX_FUTURE_S = 86_400.0
GZIP_MIN_BYTES = 8192


def json_body(handler: APIHandler, example: str) -> Any:
    """The request's JSON body, or a 400 that shows ``example``.

    jupyter_server's ``get_json_body`` decodes UTF-8 before its own JSON check, so a body that is
    not UTF-8 (byte 0x80 alone, found by the API fuzz test) would be a 500 there.
    """
    try:
        return handler.get_json_body()
    except (web.HTTPError, UnicodeDecodeError):
        raise web.HTTPError(400, f"The body must be UTF-8 JSON, e.g. {example}.") from None


class GpuApiHandler(APIHandler):
    """Base of the REST handlers: auth resource, the service, JSON errors."""

    auth_resource = AUTH_RESOURCE
    _track_activity = False  # monitoring is not user activity (idle culling must still work)

    @property
    def service(self) -> GpuService:
        """The extension's ``GpuService`` (in the web app's settings)."""
        service: GpuService = self.settings[SERVICE_KEY]
        return service

    def set_default_headers(self) -> None:
        super().set_default_headers()
        self.set_header("Cache-Control", "no-store")

    def compute_etag(self) -> None:
        """No ETag, so Tornado does not hash every body on the event loop.

        The responses are ``no-store`` and change with every sample, so an ETag would never
        save a transfer; hashing costs ~20 us per snapshot and ~3 ms per 2 MB of history.
        """

    async def ready(self) -> None:
        """Wait for the first sample; 503 if the sampler has none after a few seconds."""
        if not await self.service.wait_ready():
            raise web.HTTPError(
                503, "The GPU sampler has not produced a sample yet; try again in a moment."
            )


class DevicesHandler(GpuApiHandler):
    """``GET devices``: the backend, why there is no GPU (if so), the devices, the config."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self.ready()
        body = self.service.devices_json()
        if body is None:
            raise web.HTTPError(503, "The GPU backend is not open yet; try again in a moment.")
        await self.finish(body)


class SnapshotHandler(GpuApiHandler):
    """``GET snapshot``: the latest sample."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        sampler = self.service.sampler
        entry = sampler.latest()
        if entry is None:  # only just after start-up: wait for the first sample
            await self.ready()
            entry = sampler.latest()
            assert entry is not None  # ready() said so
        # The JSON text was built once, in the sampler thread: only its age is added here.
        await self.finish(snapshot_body(entry.json, self.service.age_s(entry)))


def parse_since(raw: str | None, now: float) -> float | None:
    """The ``since`` query argument as Unix seconds.

    Raises:
        tornado.web.HTTPError: 400 with a message for anything but a finite number from 0 to a
            day ahead of ``now``.
    """
    if raw is None:
        return None
    try:
        since = float(raw)
    except ValueError:
        raise web.HTTPError(
            400, f"since must be a Unix time in seconds (a number); got {raw[:40]!r}"
        ) from None
    if not math.isfinite(since) or since < 0:
        raise web.HTTPError(400, f"since must be a finite number of seconds >= 0; got {raw[:40]}")
    if since > now + MAX_FUTURE_S:
        raise web.HTTPError(
            400, f"since is more than a day in the future ({since:.0f} > {now:.0f} + 86400)"
        )
    return since


def parse_number(
    name: str, raw: str | None, low: float, high: float, *, integer: bool = False
) -> float | None:
    """A query argument that must be a number from ``low`` to ``high`` (``None`` if absent).

    Raises:
        tornado.web.HTTPError: 400 with a message naming the argument and its bounds.
    """
    if raw is None:
        return None
    try:
        value = float(int(raw)) if integer else float(raw)
    except ValueError:
        kind = "a whole number" if integer else "a number"
        raise web.HTTPError(400, f"{name} must be {kind}; got {raw[:40]!r}") from None
    if not (math.isfinite(value) and low <= value <= high):
        raise web.HTTPError(400, f"{name} must be from {low:g} to {high:g}; got {raw[:40]}")
    return value


class HistoryHandler(GpuApiHandler):
    """``GET history``: samples (``since``, ``limit``), or columns (``resolution``/``points``).

    Without ``resolution`` and ``points``: the full-resolution ring's samples with
    ``ts > since``, oldest first (the newest ``limit`` of them). With either: min/mean/max
    columns at that resolution (``points``: about that many rows over ``since`` to now),
    from the full-resolution ring where it covers the range at a finer resolution than a
    bucket, else from the long history's buckets. Bodies are built (and compressed) in a
    worker thread, never on the event loop.
    """

    @web.authenticated
    @authorized
    async def get(self) -> None:
        now = time.time()
        since = parse_since(self.get_query_argument("since", None), now)
        resolution = parse_number(
            "resolution", self.get_query_argument("resolution", None), 0.1, 604_800.0
        )
        points = parse_number(
            "points", self.get_query_argument("points", None), 1, 100_000, integer=True
        )
        limit = parse_number(
            "limit", self.get_query_argument("limit", None), 1, 1_000_000, integer=True
        )
        await self.ready()
        sampler = self.service.sampler
        options = sampler.options
        gzip_ok = "gzip" in self.request.headers.get("Accept-Encoding", "")
        n = None if limit is None else int(limit)
        query = ColumnsQuery(since, resolution, None if points is None else int(points), n)

        def build() -> tuple[bytes | str, bool]:
            if resolution is None and points is None:
                entries = sampler.history.since(since)
                if n is not None:
                    entries = entries[-n:]
                body = history_body(options.interval_s, [e.json for e in entries])
            else:
                body = dumps(
                    {
                        "interval_s": options.interval_s,
                        "bucket_s": sampler.buckets.bucket_s,
                        **sampler.history_columns(now, query),
                    }
                )
            if len(body) >= GZIP_MIN_BYTES and gzip_ok:
                # Ten minutes of samples are megabytes of very repetitive JSON (about 10x
                # smaller gzipped).
                return gzip.compress(body.encode(), 1), True
            return body, False

        loop = asyncio.get_running_loop()
        data, zipped = await loop.run_in_executor(None, build)
        self.set_header("Vary", "Accept-Encoding")
        if zipped:
            self.set_header("Content-Encoding", "gzip")
        await self.finish(data)


def bearer_matches(header: str, expected: str) -> bool:
    """Whether an ``Authorization`` header carries ``expected`` (``Bearer`` or ``token``).

    Compared in constant time; an empty ``expected`` (no scrape token set) never matches.
    """
    scheme, _, given = header.strip().partition(" ")
    if not expected or scheme.lower() not in ("bearer", "token"):
        return False
    return hmac.compare_digest(given.strip().encode(), expected.encode())


class MetricsHandler(GpuApiHandler):
    """``GET metrics``: the latest sample in Prometheus text format (DCGM-style names).

    Prometheus may use ``JupyterGpu.metrics_token`` instead of a Jupyter login: that token
    opens this route alone. Any other request is authenticated and authorized as usual.
    """

    _scraper = False

    async def prepare(self) -> None:  # type: ignore[override]  # jupyter_server's returns a union
        header = self.request.headers.get("Authorization", "")
        if bearer_matches(header, self.service.config.metrics_token):
            if not self.check_host():
                raise web.HTTPError(403)
            # No identity lookup: under JupyterHub it would ask the hub about this token.
            self._scraper = True
            self.current_user = self._jupyter_current_user = User(username=SCRAPER_NAME)
            return
        await super().prepare()

    async def get(self) -> None:
        if self._scraper:
            await self._send()
            return
        result = self._get_as_user()  # the decorators type it loosely: a coroutine here
        if result is not None:
            await result

    @web.authenticated
    @authorized
    async def _get_as_user(self) -> None:
        await self._send()

    async def _send(self) -> None:
        await self.ready()
        text = self.service.metrics_text()
        if text is None:
            raise web.HTTPError(503, "No sample yet.")
        await self.finish(text, set_content_type=PROMETHEUS_CONTENT_TYPE)


class OpenApiHandler(GpuApiHandler):
    """``GET openapi.json``: the machine-readable description of this API."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self.finish(openapi_json())


class MisconfiguredHandler(GpuApiHandler):
    """Every route when the configuration was invalid: 503 with the reason, so the UI can say."""

    def initialize(self, message: str) -> None:
        self.message = message

    @web.authenticated
    @authorized
    async def get(self, *args: str) -> None:
        raise web.HTTPError(503, self.message)
