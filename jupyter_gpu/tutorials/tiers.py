"""Size tiers by GPU memory and capability, and an emulation switch to prove each one.

A workshop's GPUs are rarely 80 GB Hopper parts. The notebooks pick their sizes from a
**tier**, chosen from the device's memory, and their 16-bit format from its capability:

======  ==========================  ====================================  =================
tier    picked when the GPU has     typical GPUs                          allocator budget
======  ==========================  ====================================  =================
16gb    less than 20 GiB            T4 (no bf16: fp16 + GradScaler), V100  14.5 GiB
24gb    20 to 36 GiB                L4, A10, RTX 4090                     21.5 GiB
40gb    36 to 72 GiB                A100 40GB, A6000, L40S                38 GiB
80gb    72 GiB and more             A100 80GB, H100, H200                 76 GiB
======  ==========================  ====================================  =================

bf16 is used where the GPU has it in hardware (compute capability 8.0, Ampere, and later: see
:func:`.session.native_bf16`); elsewhere the notebooks train in fp16 with a
``torch.amp.GradScaler``.

``JUPYTER_GPU_TIER=16gb`` (or ``24gb``, ``40gb``, ``80gb``) *emulates* a smaller GPU on a
larger one: the notebook caps torch's caching allocator at the tier's budget with
``torch.cuda.set_per_process_memory_fraction`` and, for ``16gb``, takes the no-bf16 path (fp16 +
GradScaler) as on a T4. An emulated run proves the sizes fit; its speeds are the big GPU's, so
the H200 targets are not judged on it. The CUDA context and libraries (about 0.5 to 1.3 GiB)
are outside the allocator's budget, which is why each budget is below the tier's nominal size.
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
    """One size tier: its name, the GPUs it stands for and the allocator budget it plans for."""

    name: TierName
    min_total_bytes: int
    budget_bytes: int
    examples: str
    bf16_when_emulated: bool


TIERS: tuple[Tier, ...] = (
    Tier("16gb", 0, int(14.5 * GiB), "T4, V100 16GB", bf16_when_emulated=False),
    Tier("24gb", 20 * GiB, int(21.5 * GiB), "L4, A10, RTX 4090", bf16_when_emulated=True),
    Tier("40gb", 36 * GiB, 38 * GiB, "A100 40GB, A6000, L40S", bf16_when_emulated=True),
    Tier("80gb", 72 * GiB, 76 * GiB, "A100 80GB, H100, H200", bf16_when_emulated=True),
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


def tier_for_memory(total_bytes: int) -> Tier:
    """The largest tier whose lower bound ``total_bytes`` reaches."""
    return [t for t in TIERS if total_bytes >= t.min_total_bytes][-1]


def requested_tier(environ: Mapping[str, str] | None = None) -> Tier | None:
    """The tier ``JUPYTER_GPU_TIER`` asks to emulate, or ``None`` when it is unset or empty.

    Raises:
        ValueError: the variable names no tier.
    """
    env = os.environ if environ is None else environ
    value = env.get(TIER_ENV, "").strip()
    return tier_named(value) if value else None


@dataclass(frozen=True)
class GpuPlan:
    """The tier a notebook runs at on this GPU, and its 16-bit format.

    Attributes:
        tier: the size tier.
        bf16: whether to train in bf16 (else fp16 with a GradScaler).
        emulated: ``JUPYTER_GPU_TIER`` chose the tier; the allocator is capped at its budget.
        total_bytes: the device's real memory.
        limit_bytes: the allocator cap applied (``None``: the whole device).
    """

    tier: Tier
    bf16: bool
    emulated: bool
    total_bytes: int
    limit_bytes: int | None

    @property
    def amp_name(self) -> str:
        """``"bf16"`` or ``"fp16"``."""
        return "bf16" if self.bf16 else "fp16"

    @property
    def needs_scaler(self) -> bool:
        """fp16 training needs a GradScaler: its range is too small for small gradients."""
        return not self.bf16

    def describe(self) -> str:
        """One line, e.g. ``tier 16gb (T4, V100 16GB), emulated: ...``."""
        precision = (
            "bf16 autocast" if self.bf16 else "fp16 autocast + GradScaler (no bf16 on this tier)"
        )
        if self.emulated:
            limit = (self.limit_bytes or 0) / GiB
            where = (
                f", emulated with {TIER_ENV}: torch's allocator capped at {limit:.1f} of "
                f"{self.total_bytes / GiB:.0f} GiB"
            )
        else:
            where = f", picked from the GPU's {self.total_bytes / GiB:.0f} GiB"
        return f"size tier {self.tier.name} ({self.tier.examples}){where}; 16-bit: {precision}"

    def as_dict(self) -> dict[str, object]:
        """JSON-ready fields."""
        return {
            "tier": self.tier.name,
            "bf16": self.bf16,
            "emulated": self.emulated,
            "limit_bytes": self.limit_bytes,
        }


def plan_for(
    total_bytes: int, bf16_supported: bool, environ: Mapping[str, str] | None = None
) -> GpuPlan:
    """The plan for a GPU of ``total_bytes`` (pure: applies nothing).

    Raises:
        ValueError: ``JUPYTER_GPU_TIER`` names no tier, or a tier larger than this GPU.
    """
    wanted = requested_tier(environ)
    if wanted is None:
        tier = tier_for_memory(total_bytes)
        return GpuPlan(tier, bf16_supported, False, total_bytes, None)
    if wanted.budget_bytes > total_bytes:
        raise ValueError(
            f"{TIER_ENV}={wanted.name} needs {wanted.budget_bytes / GiB:.1f} GiB; this GPU has "
            f"{total_bytes / GiB:.1f} GiB (emulation only makes a GPU look smaller)"
        )
    bf16 = bf16_supported and wanted.bf16_when_emulated
    return GpuPlan(wanted, bf16, True, total_bytes, wanted.budget_bytes)


def apply_plan(plan: GpuPlan, device: int = 0) -> None:
    """Cap torch's allocator at the plan's limit (nothing to do without one). Imports torch."""
    if plan.limit_bytes is None:
        return
    import torch

    torch.cuda.set_per_process_memory_fraction(plan.limit_bytes / plan.total_bytes, device)


def restore_limit(plan: GpuPlan | None, device: int = 0) -> None:
    """Put the allocator cap back to the plan's (after a demo that lowered it). Imports torch."""
    import torch

    if plan is None or not torch.cuda.is_available():
        return
    fraction = 1.0 if plan.limit_bytes is None else plan.limit_bytes / plan.total_bytes
    torch.cuda.set_per_process_memory_fraction(fraction, device)
