"""The tutorial GPT: shapes, loss, learning, checkpointing, and its FLOP count."""

import math

import pytest
import torch

from jupyter_gpu.tutorials.flops import (
    gpt_matmul_params,
    gpt_train_flops_per_token,
    mlp_train_flops_per_sample,
    tflops,
)
from jupyter_gpu.tutorials.gpt import GPT, GPTConfig, apply_rope, rope_tables
from jupyter_gpu.tutorials.mlp import launch_bound_mlp, mlp_widths

TINY = GPTConfig(vocab_size=256, context=16, n_layer=2, n_head=2, d_model=32)


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="divide"):
        GPTConfig(d_model=30, n_head=4)
    with pytest.raises(ValueError, match="style"):
        GPTConfig(style="bert")
    with pytest.raises(ValueError, match="n_layer"):
        GPTConfig(n_layer=0)
    with pytest.raises(ValueError, match="dropout"):
        GPTConfig(dropout=1.0)
    assert TINY.head_dim == 16
    assert "llama-style, 2 layers" in TINY.describe()


def test_logits_and_loss() -> None:
    torch.manual_seed(0)
    model = GPT(TINY)
    idx = torch.randint(0, 256, (3, 16))
    assert model(idx).shape == (3, 16, 256)
    loss = model(idx, torch.randint(0, 256, (3, 16)))
    assert loss.shape == ()
    # An untrained model is close to uniform over 256 tokens.
    assert abs(loss.item() - math.log(256)) < 0.5
    with pytest.raises(ValueError, match="longer than the context"):
        model(torch.zeros(1, 17, dtype=torch.long))


@pytest.mark.parametrize("style", ["llama", "gpt2"])
def test_tied_embedding_counted_once(style: str) -> None:
    config = GPTConfig(context=16, n_layer=2, n_head=2, d_model=96, style=style)
    model = GPT(config)
    assert model.lm_head.weight is model.wte.weight
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    # Every Linear, the tied output layer included once, is what gpt_matmul_params counts.
    assert gpt_matmul_params(config) == linear
    assert (model.wpe is None) == (style == "llama")


def test_swiglu_width_keeps_the_flops() -> None:
    llama = GPTConfig(d_model=1024, n_head=8, style="llama")
    gpt2 = GPTConfig(d_model=1024, n_head=8, style="gpt2")
    assert llama.mlp_hidden % 64 == 0
    assert 0.98 < gpt_matmul_params(llama) / gpt_matmul_params(gpt2) < 1.06


def test_rope_rotates_by_relative_position() -> None:
    rope = rope_tables(32, 8)
    q, k = torch.randn(8), torch.randn(8)
    # Put the same q and k at positions (5, 2) and (20, 17): same offset, same score.
    at = lambda v, pos: apply_rope(v.expand(32, 8), rope)[pos]  # noqa: E731 (a short helper)
    torch.testing.assert_close(at(q, 5) @ at(k, 2), at(q, 20) @ at(k, 17))
    torch.testing.assert_close(at(q, 7).norm(), q.norm())  # a rotation keeps lengths
    with pytest.raises(ValueError, match="even"):
        GPTConfig(d_model=6, n_head=2)


def test_flops_formula() -> None:
    n = gpt_matmul_params(TINY)
    assert gpt_train_flops_per_token(TINY) == 6 * n + 12 * 2 * 32 * 16
    assert gpt_train_flops_per_token(TINY, seq_len=8) == 6 * n + 12 * 2 * 32 * 8
    assert mlp_train_flops_per_sample([4, 3, 2]) == 6 * (12 + 6)
    assert tflops(2e12, 2.0) == 1.0
    with pytest.raises(ValueError, match="positive"):
        tflops(1.0, 0.0)


@pytest.mark.slow
def test_a_few_steps_lower_the_loss() -> None:
    torch.manual_seed(0)
    model = GPT(TINY)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    idx = torch.randint(0, 8, (8, 16))  # a small alphabet: quick to learn
    losses = []
    for _ in range(20):
        loss = model(idx[:, :-1], idx[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 1.0


@pytest.mark.parametrize("style", ["llama", "gpt2"])
def test_checkpointing_gives_the_same_gradients(style: str) -> None:
    torch.manual_seed(0)
    model = GPT(GPTConfig(context=16, n_layer=2, n_head=2, d_model=32, style=style))
    idx = torch.randint(0, 256, (2, 16))
    model(idx, idx).backward()
    plain = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.checkpointing = True
    model(idx, idx).backward()
    for a, p in zip(plain, model.parameters(), strict=True):
        torch.testing.assert_close(a, p.grad)


def test_generate_extends_the_prompt() -> None:
    model = GPT(TINY)
    out = model.generate(torch.tensor([1, 2, 3]), 5, generator=torch.Generator().manual_seed(0))
    assert out.shape == (8,)
    assert out[:3].tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match="temperature"):
        model.generate(torch.tensor([1]), 1, temperature=0)


def test_launch_bound_mlp() -> None:
    mlp = launch_bound_mlp(width=8, depth=3, n_out=2)
    assert mlp(torch.zeros(5, 8)).shape == (5, 2)
    assert sum(isinstance(m, torch.nn.Linear) for m in mlp) == 3
    assert mlp_widths(8, 3, 2) == [8, 8, 8, 2]
    with pytest.raises(ValueError, match="depth"):
        launch_bound_mlp(depth=1)
