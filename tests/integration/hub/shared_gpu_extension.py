"""The real ``JupyterGpuApp`` over a fake NVML whose GPU 0 is shared by every user's kernels.

A single-user server of the hub tests loads this instead of ``jupyter_gpu`` (same routes, same
``JupyterGpu`` options, the real sampler, attribution and privacy code). The fake lists every
running Jupyter kernel on this machine (an ``ipykernel_launcher`` process), each holding
256 MiB, as a real GPU shared by two users' servers would: so each server sees the other
user's kernel too, and must hide it. Device names say "Fake".
"""

from __future__ import annotations

from typing import Any

import psutil

from jupyter_gpu.backends import open_backend
from jupyter_gpu.config import JupyterGpu
from jupyter_gpu.server.app import JupyterGpuApp
from jupyter_gpu.server.service import GpuService
from tests.fakes.fake_nvml import FakeHandle, FakeNvml

KERNEL_MEMORY = 256 * 2**20


class SharedGpuNvml(FakeNvml):
    """A fake NVML whose GPU 0 lists every Jupyter kernel on the machine."""

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeHandle) -> list[Any]:
        if handle.index == 0 and handle.mig_slot is None:
            self.devices[0].compute = [(pid, KERNEL_MEMORY) for pid in kernel_pids()]
        return super().nvmlDeviceGetComputeRunningProcesses(handle)


def kernel_pids() -> list[int]:
    """Pids of the ipykernel processes running now, on the whole machine."""
    pids = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if any("ipykernel_launcher" in part for part in cmdline):
            pids.append(int(proc.info["pid"]))
    return pids


class SharedGpuApp(JupyterGpuApp):
    """``JupyterGpuApp`` whose sampler opens the nvml backend over ``SharedGpuNvml``."""

    def make_service(self, config: JupyterGpu) -> GpuService:
        fake = SharedGpuNvml(devices=1)
        service = super().make_service(config)
        service.sampler = service.make_sampler(
            backend_factory=lambda s: open_backend("nvml", nvml=fake, log=s.log), caches=()
        )
        return service


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    return [{"module": __name__, "app": SharedGpuApp}]
