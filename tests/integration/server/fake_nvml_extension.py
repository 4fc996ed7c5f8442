"""The real ``JupyterGpuApp`` over a fake NVML, loaded by Jupyter Server like any extension.

Enable it with ``jpserver_extensions={"tests.integration.server.fake_nvml_extension": True}``
(and ``jupyter_gpu`` off). The fake is labelled as one everywhere (device names start with
"Fake"); its two GPUs start with power "Not Supported" on GPU 1. A test's server config is
``gpu_config(**ON_FAKE_NVML, ...)``; the test reaches the fake through the app:
``fake_nvml_app(serverapp).fake``. A test that sets ``FakeNvmlGpuApp.hang_at_start`` (with
``monkeypatch``, before the server starts) gets a fake whose start-up calls of those names
block until ``fake.release(None)``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pynvml
from jupyter_server.serverapp import ServerApp

from jupyter_gpu.backends import open_backend
from jupyter_gpu.config import JupyterGpu
from jupyter_gpu.server.app import JupyterGpuApp
from jupyter_gpu.server.service import GpuService
from tests.fakes.fake_nvml import FakeNvml

#: ``api_helpers.gpu_config`` options for a server with this module in ``jupyter_gpu``'s place.
ON_FAKE_NVML: dict[str, Any] = {
    "backend": "nvml",
    "extension": "tests.integration.server.fake_nvml_extension",
}


class FakeNvmlGpuApp(JupyterGpuApp):
    """``JupyterGpuApp`` whose sampler opens the nvml backend over ``self.fake``."""

    fake: FakeNvml
    hang_at_start: ClassVar[frozenset[str]] = frozenset()
    """NVML calls on no GPU that block from the start (``{"nvmlInit"}``: a hung driver)."""

    def make_service(self, config: JupyterGpu) -> GpuService:
        self.fake = FakeNvml(devices=2)
        self.fake.fail("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_NOT_SUPPORTED, device=1)
        if self.hang_at_start:
            self.fake.hang(None, calls=self.hang_at_start)
        service = super().make_service(config)
        fake = self.fake
        service.sampler = service.make_sampler(
            backend_factory=lambda s: open_backend("nvml", nvml=fake, log=s.log), caches=()
        )
        return service


def fake_nvml_app(serverapp: ServerApp) -> FakeNvmlGpuApp:
    """The app that ``serverapp`` loaded from this module (its fake NVML is ``.fake``)."""
    app = serverapp.extension_manager.extension_points["jupyter_gpu"].app
    assert isinstance(app, FakeNvmlGpuApp)  # loaded by Jupyter Server, like the real one
    return app


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    return [{"module": __name__, "app": FakeNvmlGpuApp}]
