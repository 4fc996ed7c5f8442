"""Wire the sampler and the handlers into a running Jupyter server."""

from __future__ import annotations

import atexit
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jupyter_server.utils import url_path_join
from tornado.ioloop import IOLoop
from traitlets import TraitError

from jupyter_gpu.config import JupyterGpu
from jupyter_gpu.server.handlers import (
    SETTINGS_KEY,
    DevicesHandler,
    HistoryHandler,
    MetricsHandler,
    MisconfiguredHandler,
    OpenApiHandler,
    SnapshotHandler,
)
from jupyter_gpu.server.service import GpuService
from jupyter_gpu.server.stream import StreamHandler

if TYPE_CHECKING:
    from jupyter_server.serverapp import ServerApp

API_PREFIX = "jupyter-gpu/api/v1"


def api_routes(base_url: str) -> list[tuple[str, type[Any]]]:
    """The API's URL patterns under the server's base URL."""
    return [
        (url_path_join(base_url, API_PREFIX, path), handler)
        for path, handler in (
            ("devices", DevicesHandler),
            ("snapshot", SnapshotHandler),
            ("history", HistoryHandler),
            ("stream", StreamHandler),
            ("metrics", MetricsHandler),
            ("openapi.json", OpenApiHandler),
        )
    ]


def _stop_with_server(server_app: ServerApp, stop: Callable[[], None]) -> None:
    """Run ``stop`` when the server cleans up, and at interpreter exit as a safety net.

    jupyter_server calls shutdown hooks only on ``ExtensionApp`` extensions, so a module
    extension chains onto ``cleanup_extensions`` (which ``ServerApp._cleanup`` awaits on a
    normal stop and pytest-jupyter awaits after each test).
    """
    original = server_app.cleanup_extensions

    async def cleanup_extensions() -> None:
        stop()
        atexit.unregister(stop)
        await original()

    server_app.cleanup_extensions = cleanup_extensions  # type: ignore[method-assign]
    atexit.register(stop)


def load_server_extension(server_app: ServerApp, service: GpuService | None = None) -> None:
    """Start the sampler and register the API handlers.

    A configuration value out of bounds is logged as an error naming the option; the API then
    answers 503 with that message on every route, and no sampler runs.

    Args:
        server_app: the Jupyter server.
        service: a ready-made service (tests pass one whose sampler reads a fake NVML).
    """
    web_app: Any = server_app.web_app  # jupyter_server's add_handlers has no annotations
    base_url = web_app.settings["base_url"]
    if service is None:
        try:
            config = JupyterGpu(parent=server_app)
        except TraitError as err:
            message = f"jupyter_gpu: invalid configuration, GPU monitoring is off: {err}"
            server_app.log.error(message)
            pattern = url_path_join(base_url, API_PREFIX, "(.*)")
            web_app.add_handlers(".*$", [(pattern, MisconfiguredHandler, {"message": message})])
            return
        io_loop = getattr(server_app, "io_loop", None) or IOLoop.current()
        service = GpuService(
            config,
            io_loop,
            server_app.log,
            kernel_manager=getattr(server_app, "kernel_manager", None),
            session_manager=getattr(server_app, "session_manager", None),
        )
    web_app.settings[SETTINGS_KEY] = service
    web_app.add_handlers(".*$", api_routes(base_url))
    service.start()
    _stop_with_server(server_app, service.stop)
    c = service.config
    server_app.log.info(
        "jupyter_gpu: sampling every %.2g s (backend %s, %d s of history) at %s",
        c.interval_s,
        c.backend,
        c.history_s,
        url_path_join(base_url, API_PREFIX),
    )
