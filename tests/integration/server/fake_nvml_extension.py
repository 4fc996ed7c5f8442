"""The real ``JupyterGpuApp`` over a fake NVML, loaded by Jupyter Server like any extension.

Enable it with ``jpserver_extensions={"tests.integration.server.fake_nvml_extension": True}``
(and ``jupyter_gpu`` off). The fake is labelled as one everywhere (device names start with
"Fake"); its two GPUs start with power "Not Supported" on GPU 1. Tests reach the fake through
the app: ``serverapp.extension_manager.extension_points["jupyter_gpu"].app.fake``.
"""

from __future__ import annotations

from typing import Any

import pynvml

from jupyter_gpu.backends import open_backend
from jupyter_gpu.config import JupyterGpu
from jupyter_gpu.server.app import JupyterGpuApp
from jupyter_gpu.server.service import GpuService
from tests.fakes.fake_nvml import FakeNvml


class FakeNvmlGpuApp(JupyterGpuApp):
    """``JupyterGpuApp`` whose sampler opens the nvml backend over ``self.fake``."""

    fake: FakeNvml

    def make_service(self, config: JupyterGpu) -> GpuService:
        self.fake = FakeNvml(devices=2)
        self.fake.fail("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_NOT_SUPPORTED, device=1)
        service = super().make_service(config)
        fake = self.fake
        service.sampler = service.make_sampler(
            backend_factory=lambda s: open_backend("nvml", nvml=fake, log=s.log), caches=()
        )
        return service


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    return [{"module": __name__, "app": FakeNvmlGpuApp}]
