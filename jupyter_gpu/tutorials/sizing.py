"""Pick problem sizes for where a notebook runs: smoke test, a CPU-only machine, or a GPU.

``JUPYTER_GPU_SMOKE=1`` asks for the smoke sizes (tiny problems, so that CI runs every
notebook end to end on two CPU cores; ``tests/integration/test_notebooks.py`` prints each
notebook's time). Without it, a machine with a CUDA GPU gets the full
sizes, and a machine without one gets CPU sizes: still real training, small enough to finish,
with the CUDA-only parts skipped and said so. ``CUDA_VISIBLE_DEVICES=`` (empty) shows the
no-GPU path on a GPU machine. The CPU count recorded is what the cgroup's quota allows
(:mod:`.cpus`), not the host's cores.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Literal, TypeVar

Mode = Literal["smoke", "cpu", "gpu"]
SMOKE_ENV = "JUPYTER_GPU_SMOKE"

T = TypeVar("T")

_FALSE_WORDS = frozenset({"", "0", "false", "no", "off"})


def smoke_requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``JUPYTER_GPU_SMOKE`` asks for smoke sizes (any value but 0/false/no/off)."""
    env = os.environ if environ is None else environ
    return env.get(SMOKE_ENV, "").strip().lower() not in _FALSE_WORDS


def cuda_available() -> bool:
    """Whether torch sees a usable CUDA device (imports torch)."""
    import torch

    return bool(torch.cuda.is_available())


def run_mode(environ: Mapping[str, str] | None = None) -> Mode:
    """``"smoke"`` if requested, else ``"gpu"`` with a CUDA device, else ``"cpu"``."""
    if smoke_requested(environ):
        return "smoke"
    return "gpu" if cuda_available() else "cpu"


def pick(*, smoke: T, cpu: T, gpu: T, mode: Mode | None = None) -> T:
    """The value for the current run mode (or for ``mode`` when given).

    Raises:
        ValueError: ``mode`` is not one of ``smoke``, ``cpu``, ``gpu``.
    """
    chosen = run_mode() if mode is None else mode
    table: dict[str, T] = {"smoke": smoke, "cpu": cpu, "gpu": gpu}
    if chosen not in table:
        raise ValueError(f"mode must be 'smoke', 'cpu' or 'gpu', not {chosen!r}")
    return table[chosen]


@dataclass(frozen=True)
class Machine:
    """What a notebook runs on, as recorded next to its figures."""

    mode: Mode
    device: str  # "cuda" or "cpu": where tensors go, in smoke mode too
    gpu_name: str | None
    gpu_memory_bytes: int | None
    gpu_count: int
    torch_version: str
    cuda_version: str | None
    python_version: str
    cpu_count: int  # the CPUs this process may keep busy: the cgroup quota where there is one
    cpu_quota: float | None = None  # the cgroup's CPU quota, in CPUs (None: no quota)

    @property
    def has_gpu(self) -> bool:
        """Whether a CUDA GPU is in use."""
        return self.device == "cuda"

    def banner(self) -> str:
        """One or two lines for the top of a notebook."""
        sizes = {
            "smoke": "smoke sizes (JUPYTER_GPU_SMOKE is set): tiny problems, figures mean little",
            "cpu": "CPU sizes: no GPU here, so the CUDA-only parts are skipped",
            "gpu": "full sizes",
        }[self.mode]
        if self.has_gpu:
            memory = (self.gpu_memory_bytes or 0) / 2**30
            where = (
                f"GPU: {self.gpu_name} ({memory:.0f} GiB)"
                + (f", 1 of {self.gpu_count}" if self.gpu_count > 1 else "")
                + f"; torch {self.torch_version}, CUDA {self.cuda_version}"
            )
        else:
            quota = "" if self.cpu_quota is None else f" (cgroup quota {self.cpu_quota:g})"
            where = (
                f"no GPU: torch {self.torch_version} sees no CUDA device; running on "
                f"{self.cpu_count} CPUs{quota}"
            )
        return f"{where}\n{sizes}"

    def as_dict(self) -> dict[str, object]:
        """JSON-ready fields."""
        return asdict(self)


def describe_machine(environ: Mapping[str, str] | None = None) -> Machine:
    """Look at torch and the host once (imports torch)."""
    import torch

    from .cpus import read_cpu_budget

    has_gpu = cuda_available()
    cpus = read_cpu_budget()
    name = memory = None
    if has_gpu:
        props = torch.cuda.get_device_properties(0)
        name, memory = props.name, int(props.total_memory)
    return Machine(
        mode=run_mode(environ),
        device="cuda" if has_gpu else "cpu",
        gpu_name=name,
        gpu_memory_bytes=memory,
        gpu_count=torch.cuda.device_count() if has_gpu else 0,
        torch_version=torch.__version__,
        cuda_version=torch.version.cuda if has_gpu else None,
        python_version=platform.python_version(),
        cpu_count=cpus.usable,
        cpu_quota=cpus.quota,
    )
