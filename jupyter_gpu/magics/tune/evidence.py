"""What ``%tune`` measured of the step as it is: the figures the plan and the report read.

One :class:`Evidence` per run, made from measurements of that run only (``session.py`` takes
them): the steady time per step with its interval; a profile of steady steps (``%%profile``'s
analysis: the idle split, the DataLoader's share, the syncs and their lines, the top kernels);
one profiled step with the dtypes of its matmuls and convolutions (the least disturbed of a few,
``profile_one_call``: on a busy machine one interrupted op can hide the step's make-up); the first
two steps from the saved state (their losses, and on CUDA the allocator's peak of the first);
the model FLOPs of one step (``torch.utils.flop_counter``); the settings in force (autocast,
TF32, threads) and the CPUs this kernel may use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from jupyter_gpu.host.cpus import CpuBudget
from jupyter_gpu.magics.probes.evidence import CallProfile
from jupyter_gpu.measure import Timing
from jupyter_gpu.measure.interval import rounds_interval

#: A share of the step below which a fix aimed at it is not tried (its gain could not show).
SMALL_SHARE = 0.05


@dataclass(frozen=True)
class FirstSteps:
    """The first two steps of a variant from the saved state.

    ``losses``: what each step returned, as a float (``None`` where it returned no loss);
    ``first_s``: the first step's wall time, synchronised (a compile shows here);
    ``peak_bytes``: the allocator's peak of the first step above the memory in use before it
    (CUDA; ``None`` on CPU); ``batch``: the first batch the step drew (``--batches``).
    """

    losses: tuple[float | None, float | None]
    first_s: float
    peak_bytes: int | None = None
    batch: Any = field(default=None, repr=False)

    @property
    def loss(self) -> float | None:
        """The loss after one update: the second step's (the first's where there is no other)."""
        return self.losses[1] if self.losses[1] is not None else self.losses[0]


@dataclass
class Evidence:
    """The step as it is, measured (see the module doc). Seconds, bytes, FLOPs."""

    device: str
    step: Timing
    first: FirstSteps
    gpu_name: str = ""
    #: ``%%profile``'s analysis of steady steps (``None`` where torch returned no profile).
    analysis: Any = field(default=None, repr=False)
    #: The profiler object behind ``analysis`` (its events: the attention's pattern).
    profiler: Any = field(default=None, repr=False)
    #: One profiled step with its matmuls' dtypes.
    call: CallProfile | None = field(default=None, repr=False)
    flops_per_step: float | None = None
    flops_note: str = ""
    #: CUDA: bytes free on the device, counting what torch's cache holds unused.
    free_bytes: int | None = None
    autocast_on: bool = False
    autocast_dtype: str = ""
    tf32: tuple[bool, bool] = (False, False)
    tf32_hardware: bool = False
    threads: int = 1
    cpus: CpuBudget | None = None
    #: Where the syncs were made (the sync pass): "cell [3] line 4" -> count.
    sync_places: dict[str, int] = field(default_factory=dict)

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    @property
    def step_s(self) -> float:
        return self.step.median_s

    def step_interval(self) -> tuple[float, float, float]:
        """``(low, high, level)``: the median step time's interval (seconds), and its level.

        The level the rounds reached: 95 % is asked, and fewer rounds reach less, which the report
        then says.
        """
        return rounds_interval(list(self.step.times_s))

    @property
    def window_s(self) -> float:
        return float(getattr(self.analysis, "window_s", 0.0) or 0.0)

    def share(self, seconds: float) -> float:
        """``seconds`` as a share of the profiled steps (0 without a profile)."""
        return seconds / self.window_s if self.window_s > 0 else 0.0

    @property
    def loader_share(self) -> float:
        return self.share(float(getattr(self.analysis, "loader_s", 0.0) or 0.0))

    @property
    def gpu_idle(self) -> float | None:
        return getattr(self.analysis, "gpu_idle_fraction", None) if self.cuda else None

    @property
    def sync_count(self) -> int:
        syncs = getattr(self.analysis, "syncs", None)
        return int(syncs.count) if syncs is not None else 0

    @property
    def sync_share(self) -> float:
        syncs = getattr(self.analysis, "syncs", None)
        return self.share(float(syncs.blocked_s)) if syncs is not None else 0.0

    def matmul_share(self, *, dtype: str | None = None, conv: bool | None = None) -> float:
        """The matmuls' (or convolutions') share of one profiled step's work (0 without one).

        GPU time on CUDA, CPU op time otherwise (``CallProfile.busy_s``).
        """
        call = self.call
        if call is None or call.busy_s <= 0:
            return 0.0
        return min(1.0, call.matmul_s(dtype=dtype, conv=conv) / call.busy_s)

    def matmul_dtypes(self) -> set[str]:
        """The dtypes the profiled step's matmuls and convolutions ran in."""
        return {m.dtype for m in self.call.matmul} if self.call is not None else set()

    @property
    def mean_kernel_s(self) -> float | None:
        a = self.analysis
        if a is None or not a.kernel_count or a.gpu_busy_s is None:
            return None
        return float(a.gpu_busy_s) / int(a.kernel_count)

    @property
    def launch_bound(self) -> bool:
        """The GPU idles 30 % or more of the steps while running short kernels (under 20 µs).

        ``%%profile``'s own rule for a step bound by launching kernels (its "launch" hint):
        CUDA graphs (``reduce-overhead``) and compiling are the fixes for it.
        """
        idle, mean = self.gpu_idle, self.mean_kernel_s
        return bool(self.cuda and idle is not None and idle >= 0.3 and mean and mean < 20e-6)

    def matmul_dtype_now(self) -> str:
        """The dtype the step's matrix products run in as it is, for MFU's peak."""
        if self.autocast_on:
            return self.autocast_dtype or "bf16"
        low = self.matmul_dtypes() & {"bfloat16", "float16"}
        if low:
            return "bf16" if "bfloat16" in low else "fp16"
        return "tf32" if self.cuda and self.tf32[0] and self.tf32_hardware else "fp32"


def count_flops(run: Any) -> tuple[float | None, str]:
    """Model FLOPs of one call of ``run`` (torch's FlopCounterMode), and how they were counted.

    The counter adds up the FLOPs of the ops torch has a formula for (matmuls, convolutions,
    attention: ``torch.utils.flop_counter``), forward and backward, 2 per multiply-add: the
    model FLOPs of a step as MFU uses them. Returns ``None`` and why where it cannot count.
    """
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        return None, "torch.utils.flop_counter is missing in this torch"
    try:
        with FlopCounterMode(display=False) as counter:
            run()
    except Exception as err:  # noqa: BLE001  # a step the counter cannot follow: no MFU, said
        return None, f"torch's FLOP counter could not follow the step ({type(err).__name__})"
    total = float(counter.get_total_flops())
    if not math.isfinite(total) or total <= 0:
        return None, "torch's FLOP counter found no matmul or convolution in the step"
    return total, (
        "counted by torch.utils.flop_counter on one step (forward and backward matmuls, "
        "convolutions and attention, 2 FLOPs per multiply-add)"
    )
