"""Size tiers: picked from the GPU memory this process may use, emulated with JUPYTER_GPU_TIER."""

from __future__ import annotations

import gc
import weakref
from typing import NamedTuple

import pytest
import torch

from jupyter_gpu.tutorials.memory import saved_tensor_bytes
from jupyter_gpu.tutorials.presets import GPT_TIER_RUNS, gpt_run
from jupyter_gpu.tutorials.tiers import (
    GiB,
    GpuMemory,
    GpuPlan,
    apply_plan,
    plan_for,
    tier_for_memory,
    tier_named,
)

GB = 10**9


@pytest.mark.parametrize(
    ("total", "tier"),
    [
        (15.6 * GiB, "16gb"),  # T4
        (8 * GiB, "16gb"),  # smaller GPUs get the smallest sizes
        (22.5 * GiB, "24gb"),  # L4, A10
        (39.5 * GiB, "40gb"),  # A100 40GB
        (47.5 * GiB, "40gb"),  # A6000
        (79.2 * GiB, "80gb"),  # A100 80GB, H100
        (139.8 * GiB, "80gb"),  # H200
    ],
)
def test_tier_from_memory(total: float, tier: str) -> None:
    assert tier_for_memory(int(total)).name == tier
    # each GPU used alone, with its own CUDA context (about 0.5 GiB) already taken from its free
    alone = GpuMemory(int(total), int(total - 0.5 * GiB))
    assert plan_for(alone, bf16_supported=True, environ={}).tier.name == tier


def test_a_real_gpu_keeps_its_bf16_and_no_cap() -> None:
    t4 = plan_for(int(15.6 * GiB), bf16_supported=False, environ={})
    assert (t4.tier.name, t4.bf16, t4.emulated, t4.limit_bytes) == ("16gb", False, False, None)
    assert t4.needs_scaler
    assert not t4.tf32, "no TF32 tensor cores before Ampere"
    assert "fp16 autocast + GradScaler" in t4.describe()
    assert "tf32 = strict fp32" in t4.describe()


@pytest.mark.parametrize(
    ("free_gib", "tier"),
    [(39.0, "40gb"), (30.0, "24gb"), (18.0, "16gb")],  # a 40 GB card, a neighbour holding more
)
def test_a_process_that_finds_memory_held_gets_a_smaller_tier(free_gib: float, tier: str) -> None:
    """Two students on one A100 40GB: the second kernel sees what the first holds."""
    found = GpuMemory(total_bytes=int(39.4 * GiB), free_bytes=int(free_gib * GiB))
    plan = plan_for(found, bf16_supported=True, environ={})
    assert plan.tier.name == tier
    assert plan.limit_bytes is None
    assert f"{free_gib:.1f} GiB: free of the card's 39 GiB" in plan.describe()


def test_the_per_process_cap_counts_as_the_memory_this_process_may_use() -> None:
    """A spawner that gives each kernel half an 80 GB card gets 40gb sizes in every kernel."""
    found = GpuMemory(int(79.2 * GiB), int(78.7 * GiB), fraction=0.5)
    assert found.capped
    plan = plan_for(found, bf16_supported=True, environ={})
    assert plan.tier.name == "40gb"
    assert "per-process cap, 50% of the card's 79 GiB" in plan.describe()
    assert plan.fraction == 0.5, "restore_limit puts back the cap the process had, not 1.0"
    # memory this process holds already is its own to use again
    again = GpuMemory(int(79.2 * GiB), int(40 * GiB), fraction=1.0, reserved_bytes=int(35 * GiB))
    assert plan_for(again, bf16_supported=True, environ={}).tier.name == "80gb"


def test_emulation_needs_the_memory_and_never_raises_a_lower_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    busy = GpuMemory(int(139.8 * GiB), int(20 * GiB))  # an H200 with 120 GiB taken by others
    with pytest.raises(ValueError, match=r"this process may use 20\.0 GiB"):
        plan_for(busy, bf16_supported=True, environ={"JUPYTER_GPU_TIER": "24gb"})
    capped = GpuMemory(int(139.8 * GiB), int(139 * GiB), fraction=0.1)  # 14.0 GiB allowed
    with pytest.raises(ValueError, match=r"needs 14\.5 GiB"):
        plan_for(capped, bf16_supported=True, environ={"JUPYTER_GPU_TIER": "16gb"})
    roomy = GpuMemory(int(139.8 * GiB), int(139 * GiB), fraction=0.2)
    plan = plan_for(roomy, bf16_supported=True, environ={"JUPYTER_GPU_TIER": "16gb"})
    assert plan.fraction == pytest.approx(14.5 / 139.8, rel=1e-3)
    set_to: list[float] = []
    monkeypatch.setattr(
        torch.cuda, "set_per_process_memory_fraction", lambda f, device=None: set_to.append(f)
    )
    apply_plan(plan, 0)
    already = GpuMemory(plan.total_bytes, plan.total_bytes, fraction=0.05)  # 7 of 140 GiB
    lower = GpuPlan(plan.tier, False, False, True, already, plan.tier.budget_bytes)
    apply_plan(lower, 0)
    assert set_to == [plan.fraction, 0.05], "a cap lower than the tier's budget stays"


@pytest.mark.parametrize(("name", "bf16"), [("16gb", False), ("24GB", True), ("40", True)])
def test_emulation_caps_memory_and_16gb_drops_bf16(name: str, bf16: bool) -> None:
    plan = plan_for(int(139.8 * GiB), bf16_supported=True, environ={"JUPYTER_GPU_TIER": name})
    assert plan.emulated
    assert plan.bf16 is bf16
    assert plan.tf32 is bf16, "an emulated 16gb runs as a T4: no bf16, no TF32"
    assert plan.limit_bytes == tier_named(name).budget_bytes
    assert "emulated with JUPYTER_GPU_TIER" in plan.describe()


def test_emulation_only_makes_a_gpu_smaller() -> None:
    with pytest.raises(ValueError, match="only makes a GPU look smaller"):
        plan_for(int(22.5 * GiB), bf16_supported=True, environ={"JUPYTER_GPU_TIER": "80gb"})
    with pytest.raises(ValueError, match="use one of"):
        plan_for(int(80 * GiB), bf16_supported=True, environ={"JUPYTER_GPU_TIER": "12gb"})


def test_each_tier_has_a_gpt_and_smaller_tiers_are_smaller() -> None:
    tokens = {name: run.tokens_per_step for name, run in GPT_TIER_RUNS.items()}
    widths = {name: run.config.d_model for name, run in GPT_TIER_RUNS.items()}
    assert widths["16gb"] < widths["24gb"] < widths["40gb"] == widths["80gb"]
    assert tokens["16gb"] <= tokens["24gb"] <= tokens["80gb"]
    assert gpt_run("gpu", "16gb") is GPT_TIER_RUNS["16gb"]
    assert gpt_run("smoke").config.d_model == 64


def test_saved_tensor_bytes_leaves_nothing_alive() -> None:
    """The measured forward's tensors die with it (the old hook made a cycle with them)."""
    x = torch.randn(64, 64, requires_grad=True)
    outputs: list[weakref.ref[torch.Tensor]] = []

    def forward() -> torch.Tensor:
        y = torch.exp(x)  # exp saves its own output: the case that made a cycle
        outputs.append(weakref.ref(y))
        return torch.tanh(y).sum()

    counted = saved_tensor_bytes(forward)
    gc.collect()
    assert counted >= 2 * 64 * 64 * 4
    assert outputs[0]() is None, "the forward's output must be freed after the measurement"


class _Gpu(NamedTuple):
    name: str
    total_bytes: int
    free_bytes: int


def _fake_cuda(
    monkeypatch: pytest.MonkeyPatch,
    gpus: list[_Gpu],
    *,
    current: int = 0,
    capability: tuple[int, int] = (8, 0),
) -> list[tuple[object, int]]:
    """A fresh session over ``gpus`` (this process on ``current``), no tier or smoke run asked.

    torch says bf16 is supported whatever the capability, as it does on a T4. Returns the list
    that each ``apply_plan(plan, device)`` call is put in.
    """
    from types import SimpleNamespace

    from jupyter_gpu.tutorials import session

    applied: list[tuple[object, int]] = []
    monkeypatch.setattr(session, "_PLAN", None)
    monkeypatch.setattr(session, "_PLANNED", False)
    monkeypatch.setattr(session, "apply_plan", lambda plan, device: applied.append((plan, device)))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(gpus))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current)
    monkeypatch.setattr(
        torch.cuda,
        "get_device_properties",
        lambda d: SimpleNamespace(name=gpus[d].name, total_memory=gpus[d].total_bytes),
    )
    monkeypatch.setattr(
        torch.cuda, "mem_get_info", lambda d: (gpus[d].free_bytes, gpus[d].total_bytes)
    )
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda d: 1.0)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda d: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d: capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.delenv("JUPYTER_GPU_TIER", raising=False)
    monkeypatch.delenv("JUPYTER_GPU_SMOKE", raising=False)
    return applied


@pytest.mark.parametrize(
    ("capability", "bf16"),
    [((7, 5), False), ((8, 0), True), ((9, 0), True)],  # T4 (bf16 only emulated), A100, H100
)
def test_the_plan_is_the_current_devices_and_bf16_means_in_hardware(
    monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], bf16: bool
) -> None:
    """A %%torchrun rank on GPU 1 picks its tier from GPU 1 and caps GPU 1, not GPU 0."""
    from jupyter_gpu.tutorials import session

    gpus = [
        _Gpu("GPU 0", int(79.2 * GiB), int(79.0 * GiB)),
        _Gpu("GPU 1", int(15.6 * GiB), int(15.1 * GiB)),  # the one this process uses
    ]
    applied = _fake_cuda(monkeypatch, gpus, current=1, capability=capability)

    plan = session.current_plan()
    assert plan is not None
    assert (plan.tier.name, plan.bf16, plan.tf32) == ("16gb", bf16, bf16)
    assert plan.total_bytes == gpus[1].total_bytes
    assert plan.memory.free_bytes == gpus[1].free_bytes
    assert applied == [(plan, 1)]


def test_the_kernel_reads_the_free_memory_not_the_total(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reading a notebook's first cell makes: a 40 GB card of which another kernel holds 22."""
    from jupyter_gpu.tutorials import session

    _fake_cuda(monkeypatch, [_Gpu("NVIDIA A100-SXM4-40GB", int(39.4 * GiB), int(17.4 * GiB))])
    plan = session.current_plan()
    assert plan is not None
    assert plan.tier.name == "16gb", "the card's total (40gb) would not fit beside the neighbour"
    assert plan.bf16
    assert plan.tf32
