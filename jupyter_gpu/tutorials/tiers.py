"""Size tiers by the GPU memory this process may use, and an emulation switch to prove each one.

A workshop's GPUs are rarely 80 GB Hopper parts, and they are often shared. The notebooks pick
their sizes from a **tier**, chosen from the memory *this process may use* when the notebook
starts, and their 16-bit format from the GPU's capability:

======  =================================  ====================================  ================
tier    picked when this process may use   typical GPUs (used alone)             allocator budget
======  =================================  ====================================  ================
16gb    less than 20 GiB                   T4 (no bf16: fp16 + GradScaler), V100  14.5 GiB
24gb    20 to 36 GiB                       L4, A10, RTX 4090                     21.5 GiB
40gb    36 to 72 GiB                       A100 40GB, A6000, L40S                38 GiB
80gb    72 GiB and more                    A100 80GB, H100, H200                 76 GiB
======  =================================  ====================================  ================

"May use" is the smaller of the GPU's free memory (``torch.cuda.mem_get_info``, which counts
every process on the card) and torch's per-process cap (``torch.cuda.set_per_process_memory_
fraction`` x the card's memory), plus what this process's allocator holds already: a notebook
that starts while another kernel holds 30 GB of a 40 GB card gets the 16gb sizes, not the full
model. Two kernels that start at the same moment both see the card empty; a room that shares
cards gives each kernel a cap (``docs/teaching.md``).

bf16 is used where the GPU has it in hardware (compute capability 8.0, Ampere, and later: see
:func:`.session.native_bf16`); elsewhere the notebooks train in fp16 with a
``torch.amp.GradScaler``. TF32 tensor cores exist from the same generation on
(:func:`.session.native_tf32`): on a T4 or a V100 "tf32" computes exactly as strict fp32.

``JUPYTER_GPU_TIER=16gb`` (or ``24gb``, ``40gb``, ``80gb``) *emulates* a smaller GPU on a
larger one: the notebook caps torch's caching allocator at the tier's budget with
``torch.cuda.set_per_process_memory_fraction`` and, for ``16gb``, takes the path of a T4 (no
bf16: fp16 + GradScaler; no TF32). An emulated run proves the sizes fit; its speeds are the big
GPU's, so the H200 targets are not judged on it. CUDA's own memory (its context and the kernels'
code, which notebook 00 measures as NVML's figure minus torch's reserved) is outside the
allocator's budget, which is why each budget is below the tier's nominal size.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

TierName = Literal["16gb", "24gb", "40gb", "80gb"]
TIER_ENV = "JUPYTER_GPU_TIER"
GiB = 2**30


@dataclass(frozen=True)
class Tier:
    """One size tier: its name, when it is picked, and the allocator budget it plans for.

    Attributes:
        min_usable_bytes: the tier is picked when this process may use at least this much.
        budget_bytes: what an emulated run caps torch's allocator at.
        bf16_when_emulated, tf32_when_emulated: whether the GPUs the tier stands for compute
            in bf16 / TF32 (an emulated 16gb run takes a T4's path: neither).
    """

    name: TierName
    min_usable_bytes: int
    budget_bytes: int
    examples: str
    bf16_when_emulated: bool
    tf32_when_emulated: bool


TIERS: tuple[Tier, ...] = (
    Tier("16gb", 0, int(14.5 * GiB), "T4, V100 16GB", False, False),
    Tier("24gb", 20 * GiB, int(21.5 * GiB), "L4, A10, RTX 4090", True, True),
    Tier("40gb", 36 * GiB, 38 * GiB, "A100 40GB, A6000, L40S", True, True),
    Tier("80gb", 72 * GiB, 76 * GiB, "A100 80GB, H100, H200", True, True),
)
_BY_NAME: dict[str, Tier] = {t.name: t for t in TIERS}


def tier_named(name: str) -> Tier:
    """The tier called ``name`` (``16gb``, ``16GB`` and ``16`` all mean the same).

    Raises:
        ValueError: not a tier's name.
    """
    key = name.strip().lower().removesuffix("gib").removesuffix("gb").removesuffix("g")
    tier = _BY_NAME.get(f"{key}gb")
    if tier is None:
        raise ValueError(f"{TIER_ENV}={name!r}: use one of {', '.join(_BY_NAME)}")
    return tier


def tier_for_memory(usable_bytes: int) -> Tier:
    """The largest tier whose lower bound ``usable_bytes`` reaches."""
    return [t for t in TIERS if usable_bytes >= t.min_usable_bytes][-1]


def requested_tier(environ: Mapping[str, str] | None = None) -> Tier | None:
    """The tier ``JUPYTER_GPU_TIER`` asks to emulate, or ``None`` when it is unset or empty.

    Raises:
        ValueError: the variable names no tier.
    """
    env = os.environ if environ is None else environ
    value = env.get(TIER_ENV, "").strip()
    return tier_named(value) if value else None


@dataclass(frozen=True)
class GpuMemory:
    """The GPU memory this process finds when a notebook starts, in bytes.

    Attributes:
        total_bytes: the card's memory (``torch.cuda.mem_get_info``'s total).
        free_bytes: free on the card now, every process's use subtracted (its free).
        fraction: torch's per-process cap (``torch.cuda.get_per_process_memory_fraction``;
            1.0 without one), however it was set.
        reserved_bytes: what this process's caching allocator holds already.
    """

    total_bytes: int
    free_bytes: int
    fraction: float = 1.0
    reserved_bytes: int = 0

    @classmethod
    def idle(cls, total_bytes: int) -> GpuMemory:
        """A card of ``total_bytes`` that nobody uses yet."""
        return cls(total_bytes, total_bytes)

    @property
    def usable_bytes(self) -> int:
        """What this process may hold at most: the free memory and the cap, the smaller."""
        reachable = self.free_bytes + self.reserved_bytes
        return max(0, min(reachable, int(self.fraction * self.total_bytes)))

    @property
    def capped(self) -> bool:
        """Whether the per-process cap, not the free memory, sets :attr:`usable_bytes`."""
        return int(self.fraction * self.total_bytes) < self.free_bytes + self.reserved_bytes

    def describe(self) -> str:
        """E.g. ``21.3 GiB: free of the card's 40 GiB`` or ``... capped at 50% of ...``."""
        usable, total = self.usable_bytes / GiB, self.total_bytes / GiB
        if self.capped:
            return (
                f"{usable:.1f} GiB: torch's per-process cap, {self.fraction:.0%} of the card's "
                f"{total:.0f} GiB"
            )
        return f"{usable:.1f} GiB: free of the card's {total:.0f} GiB"


@dataclass(frozen=True)
class GpuPlan:
    """The tier a notebook runs at on this GPU, and its 16-bit format.

    Attributes:
        tier: the size tier.
        bf16: whether to train in bf16 (else fp16 with a GradScaler).
        tf32: whether fp32 matrix products can run on TF32 tensor cores here (compute
            capability 8.0 and later, and not an emulated pre-Ampere tier).
        emulated: ``JUPYTER_GPU_TIER`` chose the tier; the allocator is capped at its budget.
        memory: what this process found on the GPU when the plan was made.
        limit_bytes: the allocator cap the plan applies (``None``: it applies none).
    """

    tier: Tier
    bf16: bool
    tf32: bool
    emulated: bool
    memory: GpuMemory
    limit_bytes: int | None

    @property
    def total_bytes(self) -> int:
        """The card's memory."""
        return self.memory.total_bytes

    @property
    def fraction(self) -> float:
        """The per-process fraction the notebook runs with (what :func:`restore_limit` sets)."""
        if self.limit_bytes is None:
            return self.memory.fraction
        return min(self.memory.fraction, self.limit_bytes / self.memory.total_bytes)

    @property
    def amp_name(self) -> str:
        """``"bf16"`` or ``"fp16"``."""
        return "bf16" if self.bf16 else "fp16"

    @property
    def needs_scaler(self) -> bool:
        """fp16 training needs a GradScaler: its range is too small for small gradients."""
        return not self.bf16

    def describe(self) -> str:
        """One line, e.g. ``size tier 16gb (T4, V100 16GB), emulated: ...``."""
        precision = (
            "bf16 autocast" if self.bf16 else "fp16 autocast + GradScaler (no bf16 on this tier)"
        )
        tf32 = "TF32 tensor cores" if self.tf32 else "no TF32 tensor cores (tf32 = strict fp32)"
        if self.emulated:
            limit = (self.limit_bytes or 0) / GiB
            where = (
                f", emulated with {TIER_ENV}: torch's allocator capped at {limit:.1f} of "
                f"{self.total_bytes / GiB:.0f} GiB"
            )
        else:
            where = f", picked from the memory this process may use ({self.memory.describe()})"
        name = f"size tier {self.tier.name} ({self.tier.examples})"
        return f"{name}{where}; 16-bit: {precision}; {tf32}"

    def as_dict(self) -> dict[str, object]:
        """JSON-ready fields."""
        return {
            "tier": self.tier.name,
            "bf16": self.bf16,
            "tf32": self.tf32,
            "emulated": self.emulated,
            "limit_bytes": self.limit_bytes,
            "usable_bytes": self.memory.usable_bytes,
            "free_bytes": self.memory.free_bytes,
            "fraction": self.memory.fraction,
        }


def plan_for(
    memory: GpuMemory | int,
    bf16_supported: bool,
    environ: Mapping[str, str] | None = None,
    *,
    tf32_supported: bool | None = None,
) -> GpuPlan:
    """The plan for what this process found on its GPU (pure: applies nothing).

    Args:
        memory: the reading; a plain int is a card of that size that nobody uses yet.
        bf16_supported: the GPU computes bf16 in hardware.
        environ: where to read ``JUPYTER_GPU_TIER`` (default ``os.environ``).
        tf32_supported: the GPU has TF32 tensor cores (default: the same as bf16, which came
            with them, in Ampere).

    Raises:
        ValueError: ``JUPYTER_GPU_TIER`` names no tier, or a tier larger than this process may
            use.
    """
    found = GpuMemory.idle(memory) if isinstance(memory, int) else memory
    tf32 = bf16_supported if tf32_supported is None else tf32_supported
    wanted = requested_tier(environ)
    if wanted is None:
        tier = tier_for_memory(found.usable_bytes)
        return GpuPlan(tier, bf16_supported, tf32, False, found, None)
    if wanted.budget_bytes > found.usable_bytes:
        raise ValueError(
            f"{TIER_ENV}={wanted.name} needs {wanted.budget_bytes / GiB:.1f} GiB; this process "
            f"may use {found.describe()} (emulation only makes a GPU look smaller)"
        )
    bf16 = bf16_supported and wanted.bf16_when_emulated
    tf32 = tf32 and wanted.tf32_when_emulated
    return GpuPlan(wanted, bf16, tf32, True, found, wanted.budget_bytes)


def apply_plan(plan: GpuPlan, device: int = 0) -> None:
    """Cap torch's allocator at the plan's limit (nothing to do without one). Imports torch.

    A cap the process already had and that is lower stays: emulation never raises it.
    """
    if plan.limit_bytes is None:
        return
    import torch

    torch.cuda.set_per_process_memory_fraction(plan.fraction, device)


def allocator_fraction(device: int = 0) -> float | None:
    """The allocator's per-process cap on GPU ``device`` now, however it was set.

    ``None`` in a torch without ``torch.cuda.get_per_process_memory_fraction``. Imports torch.
    """
    import torch

    getter = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    return float(getter(device)) if getter is not None else None


def restore_limit(plan: GpuPlan | None, device: int = 0) -> None:
    """Put the allocator cap back to the plan's (after a demo that lowered it). Imports torch."""
    import torch

    if plan is None or not torch.cuda.is_available():
        return
    torch.cuda.set_per_process_memory_fraction(plan.fraction, device)
