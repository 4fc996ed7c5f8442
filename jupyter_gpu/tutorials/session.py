"""What every notebook sets up in its first cell: machine, size tier, 16-bit format, results.

``nb = begin("02-mixed-precision")`` looks at the machine once, picks the size tier from the
GPU memory this process may use (or emulates the one ``JUPYTER_GPU_TIER`` names, see
:mod:`.tiers`), keeps Inductor's compile workers within the CPU quota (:mod:`.cpus`), prints
what it found, and creates the notebook's :class:`~.results.Results`, which the notebook's one
bookkeeping cell fills at the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .cpus import limit_compile_threads
from .results import Results
from .sizing import Machine, describe_machine
from .tiers import GpuMemory, GpuPlan, TierName, allocator_fraction, apply_plan, plan_for

if TYPE_CHECKING:
    import torch

_PLAN: GpuPlan | None = None
_PLANNED = False


def current_plan() -> GpuPlan | None:
    """This process's GPU plan (``None`` without a GPU); applied once, to the current device.

    The current device is GPU 0 in a kernel and the rank's own GPU in a ``%%torchrun`` rank (its
    preamble selects it first), so each rank picks its tier from, and caps, the GPU it uses. The
    tier follows the memory this process may use there (:func:`gpu_memory`), so ranks whose
    GPUs hold different amounts of other work can pick different tiers.

    Raises:
        ValueError: ``JUPYTER_GPU_TIER`` names no tier or one larger than the GPU.
    """
    global _PLAN, _PLANNED  # noqa: PLW0603  # one plan per kernel: the allocator cap is global
    if not _PLANNED:
        import torch

        if describe_machine().has_gpu:
            device = torch.cuda.current_device()
            _PLAN = plan_for(
                gpu_memory(device), native_bf16(device), tf32_supported=native_tf32(device)
            )
            apply_plan(_PLAN, device)
        _PLANNED = True
    return _PLAN


def gpu_memory(device: int) -> GpuMemory:
    """What this process may use on GPU ``device`` now (initialises CUDA there).

    The free memory is the driver's (``cudaMemGetInfo``, every process on the card counted), read
    after this process's own CUDA context exists, so the context is not counted as usable. The cap
    is torch's per-process fraction, however it was set (``set_per_process_memory_fraction``, or
    ``PYTORCH_CUDA_ALLOC_CONF=per_process_memory_fraction:F`` in a torch that reads it).
    """
    import torch

    free, total = torch.cuda.mem_get_info(device)
    fraction = allocator_fraction(device)
    fraction = 1.0 if fraction is None else fraction
    return GpuMemory(int(total), int(free), fraction, int(torch.cuda.memory_reserved(device)))


def native_bf16(device: int) -> bool:
    """Whether GPU ``device`` computes in bf16 in hardware (compute capability 8.0 and later).

    Not ``torch.cuda.is_bf16_supported()``: by default that also says True where bf16 is only
    emulated in software (slowly), as on a T4, which is to train in fp16 with a GradScaler.
    """
    import torch

    if torch.version.hip:  # every ROCm GPU torch supports has bf16
        return True
    return torch.cuda.get_device_capability(device)[0] >= 8


def native_tf32(device: int) -> bool:
    """Whether GPU ``device`` has TF32 tensor cores (NVIDIA compute capability 8.0 and later).

    Before Ampere (a T4 is 7.5, a V100 7.0) allowing TF32 changes nothing: fp32 matrix products
    run in strict fp32 either way. On ROCm this says False: TF32 is NVIDIA's mode.
    """
    import torch

    if torch.version.hip:
        return False
    return torch.cuda.get_device_capability(device)[0] >= 8


def current_tier_name() -> TierName:
    """The current plan's tier (``80gb`` where there is no plan: the sizes then do not use it)."""
    plan = current_plan()
    return plan.tier.name if plan else "80gb"


@dataclass
class Session:
    """A notebook's machine, GPU plan and results."""

    notebook: str
    machine: Machine
    plan: GpuPlan | None
    results: Results

    @property
    def device(self) -> str:
        """``"cuda"`` or ``"cpu"``."""
        return self.machine.device

    @property
    def gpu(self) -> bool:
        """Whether a CUDA GPU is in use."""
        return self.machine.has_gpu

    @property
    def amp_dtype(self) -> torch.dtype | None:
        """bf16 or fp16 on a GPU (by the plan), ``None`` on a CPU (train in fp32 there)."""
        import torch

        if self.plan is None or not self.gpu:
            return None
        return torch.bfloat16 if self.plan.bf16 else torch.float16

    @property
    def amp_name(self) -> str:
        """``bf16``, ``fp16`` or ``fp32`` (no autocast)."""
        return self.plan.amp_name if self.plan and self.gpu else "fp32"

    def grad_scaler(self) -> torch.amp.GradScaler:
        """A GradScaler, enabled only for fp16 (with bf16 or fp32 it passes calls through)."""
        import torch

        return torch.amp.GradScaler(self.device, enabled=self.amp_name == "fp16")

    def banner(self) -> str:
        """The machine, and on a GPU the tier and the 16-bit format."""
        text = self.machine.banner()
        if self.plan is not None:
            text += "\n" + self.plan.describe()
        return text


def begin(notebook: str) -> Session:
    """Set a notebook up: machine, GPU plan (applied), results; prints the banner.

    Raises:
        ValueError: ``JUPYTER_GPU_TIER`` names no tier or one larger than the GPU.
    """
    import torch

    plan = current_plan()
    machine = describe_machine()
    limit_compile_threads()  # Inductor's worker pool sized by the CPU quota, not the host's cores
    if not machine.has_gpu:  # CPUs compute denormal floats (Adam's first steps) 10-100x slower
        torch.set_flush_denormal(True)
    session = Session(notebook, machine, plan, Results(notebook, machine, plan))
    print(session.banner())  # noqa: T201  # the notebook's first output
    return session
