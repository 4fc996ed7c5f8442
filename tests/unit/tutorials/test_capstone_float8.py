"""FP8 for the capstone: why it cannot run here, the loss-curve agreement, the state put back."""

import importlib.util

import pytest
import torch

from jupyter_gpu.tutorials.capstone.float8 import (
    TORCHAO_WRITTEN_AGAINST,
    Float8Swap,
    TrainingState,
    agreement,
    float8_unavailable,
)
from jupyter_gpu.tutorials.capstone.model import CapstoneGPT
from jupyter_gpu.tutorials.capstone.shapes import final_shape_from_spec

HAS_TORCHAO = importlib.util.find_spec("torchao") is not None


def test_fp8_is_refused_on_a_cpu_with_a_reason() -> None:
    why = float8_unavailable("cpu")
    assert "FP8 tensor cores" in why
    assert float8_unavailable("cpu", bf16=False)  # a reason either way


def test_the_loss_curves_agree_within_a_relative_tolerance() -> None:
    bf16 = [5.0, 4.0, 3.0, 2.0]
    close = agreement(bf16, [5.1, 4.1, 3.02, 2.02], last=2, tolerance=0.02)
    assert close.agrees
    assert close.relative_difference == pytest.approx(0.008)
    assert close.largest_step_difference == pytest.approx(0.1)
    assert "0.80% apart, tolerance 2%" in close.describe()
    far = agreement(bf16, [5.0, 4.0, 3.2, 2.2], last=2, tolerance=0.02)
    assert not far.agrees
    with pytest.raises(ValueError, match="one length"):
        agreement(bf16, bf16[:3], last=2, tolerance=0.02)
    with pytest.raises(ValueError, match="last"):
        agreement(bf16, bf16, last=5, tolerance=0.02)


def test_training_state_puts_weights_moments_and_scaler_back() -> None:
    torch.manual_seed(0)
    model = CapstoneGPT(final_shape_from_spec("d128-hd64-l2-t64"), sdpa=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    x = torch.randint(0, 256, (2, 64))

    def step() -> None:
        model(x, x).backward()
        optimizer.step()
        optimizer.zero_grad()

    step()  # the moments exist
    saved = TrainingState(model, optimizer, scaler)
    weights = [p.detach().clone() for p in model.parameters()]
    moments = [optimizer.state[p]["exp_avg"].clone() for p in model.parameters()]
    for _ in range(2):
        step()
    assert not all(torch.equal(a, b) for a, b in zip(weights, model.parameters(), strict=True))
    saved.restore()
    assert all(torch.equal(a, b) for a, b in zip(weights, model.parameters(), strict=True))
    for p, m in zip(model.parameters(), moments, strict=True):
        assert torch.equal(optimizer.state[p]["exp_avg"], m)
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.skipif(not HAS_TORCHAO, reason=f"torchao {TORCHAO_WRITTEN_AGAINST} not installed")
def test_float8_twins_share_the_weights_and_switch_in_and_out() -> None:
    from torchao.float8.float8_linear import Float8Linear

    model = CapstoneGPT(final_shape_from_spec("d128-hd64-l2-t64"), sdpa=True)
    before = {id(p) for p in model.parameters()}
    swap = Float8Swap(model.blocks)
    assert swap.converted == 4 * 2  # qkv, proj, fc, proj in each of 2 blocks
    swap.use(True)
    assert isinstance(model.blocks[0].mlp.fc, Float8Linear)
    assert {id(p) for p in model.parameters()} == before  # the same weights, no copy
    with swap.off():
        assert type(model.blocks[0].mlp.fc) is torch.nn.Linear
    assert isinstance(model.blocks[0].mlp.fc, Float8Linear)
    assert type(model.lm_head) is torch.nn.Linear  # tied to the embedding: left in bf16
