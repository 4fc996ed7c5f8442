"""The server extension as a jupyter_server ``ExtensionApp``: settings, routes, start and stop.

jupyter_server drives the lifecycle: it links the app (the ``JupyterGpu`` options reach it from
the server's config files and command line), calls ``initialize_settings`` (the sampler starts
there) and ``initialize_handlers`` (the routes, which ``ExtensionApp`` joins under the server's
base URL), and awaits ``stop_extension`` when the server shuts down (the sampler stops there).
"""

from __future__ import annotations

import os
import time
from typing import Any

from jupyter_server.extension.application import ExtensionApp
from jupyter_server.utils import url_path_join
from traitlets import TraitError

from jupyter_gpu.backends.reasons import BACKEND_ENV, SIMULATED_DEVICES_ENV, SIMULATED_EPOCH_ENV
from jupyter_gpu.config import JupyterGpu
from jupyter_gpu.server.cache import CacheClearHandler
from jupyter_gpu.server.handlers import (
    SERVICE_KEY,
    DevicesHandler,
    HistoryHandler,
    MetricsHandler,
    MisconfiguredHandler,
    OpenApiHandler,
    SnapshotHandler,
)
from jupyter_gpu.server.notebook_copy import TutorialsHandler
from jupyter_gpu.server.service import GpuService
from jupyter_gpu.server.stream import StreamHandler

API_PREFIX = "jupyter-gpu/api/v1"
ROUTES: tuple[tuple[str, type[Any]], ...] = (
    ("devices", DevicesHandler),
    ("snapshot", SnapshotHandler),
    ("history", HistoryHandler),
    ("stream", StreamHandler),
    ("metrics", MetricsHandler),
    ("openapi.json", OpenApiHandler),
    ("compile-cache/clear", CacheClearHandler),
    ("tutorials", TutorialsHandler),
)


class JupyterGpuApp(ExtensionApp):
    """GPU monitoring for Jupyter: one background sampler and the ``jupyter-gpu/api/v1`` routes.

    Its options are ``JupyterGpu``'s (``c.JupyterGpu.*``, ``--JupyterGpu.*``). An invalid value
    does not stop the server: it is logged as an error naming the option, and every route of
    the API answers 503 with that message.
    """

    name = "jupyter_gpu"
    description = "GPU monitoring for Jupyter: the jupyter-gpu/api/v1 routes and their sampler."
    # Lists JupyterGpu's options in ``python -m jupyter_gpu.server --help-all``.
    classes = [JupyterGpu]  # noqa: RUF012 (traitlets reads this class attribute as is)
    # When launched by itself (``python -m jupyter_gpu.server``), land on the devices route.
    extension_url = "/" + API_PREFIX + "/devices"

    service: GpuService | None = None
    """The running service, ``None`` before ``initialize_settings`` or with invalid options."""
    config_error: str | None = None
    """Why the options were refused (the message every route answers with), else ``None``."""
    _env_before: dict[str, str | None] | None = None

    def make_service(self, config: JupyterGpu) -> GpuService:
        """The service for validated options (tests override this to read a fake NVML)."""
        server = self.serverapp
        assert server is not None  # linked by jupyter_server before initialize
        return GpuService(
            config,
            server.io_loop,
            server.log,
            kernel_manager=getattr(server, "kernel_manager", None),
            session_manager=getattr(server, "session_manager", None),
        )

    def initialize_settings(self) -> None:
        """Validate the options, then create and start the service (its sampler thread)."""
        server = self.serverapp
        assert server is not None
        try:
            config = JupyterGpu(parent=self)
        except TraitError as err:
            self.config_error = f"jupyter_gpu: invalid configuration, GPU monitoring is off: {err}"
            server.log.error(self.config_error)
            return
        if config.simulated_faults and config.backend != "simulated":
            server.log.warning(
                "jupyter_gpu: JupyterGpu.simulated_faults is ignored: it applies only to the "
                "simulated backend (backend is %r)",
                config.backend,
            )
        if config.backend == "simulated":  # before the sampler opens its backend
            self._share_simulated_backend(config.simulated_devices)
        service = self.make_service(config)
        self.settings[SERVICE_KEY] = service
        self.service = service
        service.start()
        base_url = server.base_url
        server.log.info(
            "jupyter_gpu: sampling every %.2g s (backend %s, %d s of history) at %s",
            config.interval_s,
            config.backend,
            config.history_s,
            url_path_join(base_url, API_PREFIX),
        )
        if config.backend == "simulated" and config.simulated_faults:
            server.log.info("jupyter_gpu: simulated faults: %s", ", ".join(config.simulated_faults))

    def _share_simulated_backend(self, devices: int) -> None:
        """Make this server's kernels use the simulated GPUs too (``%gpu``, ``%gpu --watch``).

        Kernels inherit the server's environment (local kernels; a kernel gateway's do not), so
        ``JUPYTER_GPU_BACKEND=simulated`` here makes ``%gpu`` in them show the GPUs the panel
        shows rather than "No GPU", and ``JUPYTER_GPU_SIMULATED_EPOCH`` (now, which this
        server's sampler reads too) puts their simulated jobs where this server's are. Restored
        when the extension stops.
        """
        values = {
            BACKEND_ENV: "simulated",
            SIMULATED_DEVICES_ENV: str(devices),
            SIMULATED_EPOCH_ENV: repr(time.time()),
        }
        self._env_before = {k: os.environ.get(k) for k in values}
        os.environ.update(values)
        if self.serverapp is not None:
            self.serverapp.log.info(
                "jupyter_gpu: kernels started by this server use the simulated backend too "
                "(%s=simulated in their environment)",
                BACKEND_ENV,
            )

    def initialize_handlers(self) -> None:
        """The API's routes (relative: ``ExtensionApp`` prepends the base URL)."""
        if self.service is None:
            message = self.config_error or "jupyter_gpu: GPU monitoring did not start"
            self.handlers.append(
                (url_path_join(API_PREFIX, "(.*)"), MisconfiguredHandler, {"message": message})
            )
            return
        self.handlers.extend((url_path_join(API_PREFIX, path), h) for path, h in ROUTES)

    async def stop_extension(self) -> None:
        """Stop the sampler threads and close the stream's sockets (the server is stopping)."""
        if self._env_before is not None:
            for key, value in self._env_before.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            self._env_before = None
        if self.service is not None:
            await self.service.stop()
            if self.serverapp is not None:
                self.serverapp.log.debug("jupyter_gpu: the sampler stopped")
