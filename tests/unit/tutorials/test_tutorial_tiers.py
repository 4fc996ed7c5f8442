"""Size tiers: picked from the GPU's memory, emulated with JUPYTER_GPU_TIER, and what they mean."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from jupyter_gpu.tutorials.memory import saved_tensor_bytes
from jupyter_gpu.tutorials.presets import GPT_TIER_RUNS, gpt_run
from jupyter_gpu.tutorials.tiers import GiB, plan_for, tier_for_memory, tier_named

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


def test_a_real_gpu_keeps_its_bf16_and_no_cap() -> None:
    t4 = plan_for(int(15.6 * GiB), bf16_supported=False, environ={})
    assert (t4.tier.name, t4.bf16, t4.emulated, t4.limit_bytes) == ("16gb", False, False, None)
    assert t4.needs_scaler
    assert "fp16 autocast + GradScaler" in t4.describe()


@pytest.mark.parametrize(("name", "bf16"), [("16gb", False), ("24GB", True), ("40", True)])
def test_emulation_caps_memory_and_16gb_drops_bf16(name: str, bf16: bool) -> None:
    plan = plan_for(int(139.8 * GiB), bf16_supported=True, environ={"JUPYTER_GPU_TIER": name})
    assert plan.emulated
    assert plan.bf16 is bf16
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


@pytest.mark.parametrize(
    ("capability", "bf16"),
    [((7, 5), False), ((8, 0), True), ((9, 0), True)],  # T4 (bf16 only emulated), A100, H100
)
def test_the_plan_is_the_current_devices_and_bf16_means_in_hardware(
    monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], bf16: bool
) -> None:
    """A %%torchrun rank on GPU 1 picks its tier from GPU 1 and caps GPU 1, not GPU 0."""
    from types import SimpleNamespace

    from jupyter_gpu.tutorials import session

    sizes = {0: int(79.2 * GiB), 1: int(15.6 * GiB)}  # GPU 1 is the one this process uses
    applied: list[tuple[object, int]] = []
    monkeypatch.setattr(session, "_PLAN", None)
    monkeypatch.setattr(session, "_PLANNED", False)
    monkeypatch.setattr(session, "apply_plan", lambda plan, device: applied.append((plan, device)))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(
        torch.cuda,
        "get_device_properties",
        lambda d: SimpleNamespace(name=f"GPU {d}", total_memory=sizes[d]),
    )
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d: capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)  # as on a T4
    monkeypatch.delenv("JUPYTER_GPU_TIER", raising=False)
    monkeypatch.delenv("JUPYTER_GPU_SMOKE", raising=False)

    plan = session.current_plan()
    assert plan is not None
    assert (plan.tier.name, plan.bf16, plan.total_bytes) == ("16gb", bf16, sizes[1])
    assert applied == [(plan, 1)]
