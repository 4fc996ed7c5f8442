"""``JupyterGpuApp`` sampling faster than its traits allow, for ``soak.py`` only.

``interval_s`` may not go below 0.1 s in a real configuration; the soak runs the simulated
backend at 20 Hz (``JUPYTER_GPU_SOAK_INTERVAL_S``, default 0.05) to pack a day of ticks at 1 Hz
into 72 minutes. Everything else (routes, stream, history length) is the real extension's.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from jupyter_gpu.config import JupyterGpu
from jupyter_gpu.server.app import JupyterGpuApp
from jupyter_gpu.server.service import GpuService, sampler_options


class SoakGpuApp(JupyterGpuApp):
    """The real extension with the sampler's interval taken from the environment."""

    def make_service(self, config: JupyterGpu) -> GpuService:
        service = super().make_service(config)
        interval_s = float(os.environ.get("JUPYTER_GPU_SOAK_INTERVAL_S", "0.05"))
        service.sampler = service.make_sampler(
            replace(sampler_options(config), interval_s=interval_s)
        )
        return service


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    return [{"module": __name__, "app": SoakGpuApp}]
