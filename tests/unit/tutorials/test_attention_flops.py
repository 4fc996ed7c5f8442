"""A causal attention kernel's work, against a direct count of the pairs its mask keeps."""

from __future__ import annotations

import pytest
import torch

from jupyter_gpu.tutorials.flops import (
    MODEL_FLOPS_CONVENTION,
    causal_attention_flops,
    gpt_train_flops_per_token,
)
from jupyter_gpu.tutorials.gpt import GPTConfig


@pytest.mark.parametrize(("seq_len", "head_dim"), [(1, 8), (5, 4), (64, 16), (257, 128)])
def test_the_forward_counts_the_unmasked_pairs(seq_len: int, head_dim: int) -> None:
    # The pairs (query i, key j) that scaled_dot_product_attention(is_causal=True) keeps: j <= i.
    kept = int(torch.tril(torch.ones(seq_len, seq_len, dtype=torch.bool)).sum())
    batch, heads = 3, 2
    # Q K^T and P V: a multiply and an add per head-width element, for each kept pair
    direct = batch * heads * kept * 2 * (2 * head_dim)
    assert causal_attention_flops(batch, heads, seq_len, head_dim, backward=False) == direct
    everything = batch * heads * seq_len * seq_len * 4 * head_dim
    assert (
        causal_attention_flops(batch, heads, seq_len, head_dim, backward=False, causal=False)
        == everything
    )


def test_the_backward_is_two_and_a_half_forwards_and_checkpointing_adds_one() -> None:
    forward = causal_attention_flops(2, 4, 128, 64, backward=False)
    assert causal_attention_flops(2, 4, 128, 64) == 3.5 * forward
    assert causal_attention_flops(2, 4, 128, 64, forward_passes=2) == 4.5 * forward


def test_a_kernel_s_work_is_about_half_what_model_flops_count_for_attention() -> None:
    # Model FLOPs count 12 L d T per token for attention (whole T x T, forward and backward
    # at 3 forwards); the kernel did the causal half, at 3.5 forwards.
    config = GPTConfig(n_layer=2, d_model=256, n_head=4, context=1024)
    tokens = config.context
    model_attention = (
        gpt_train_flops_per_token(config, config.context) - gpt_train_flops_per_token(config, 0)
    ) * tokens
    kernel = config.n_layer * causal_attention_flops(
        1, config.n_head, config.context, config.head_dim
    )
    assert kernel / model_attention == pytest.approx(3.5 / 3 * (tokens + 1) / (2 * tokens))
    assert "causal mask not subtracted" in MODEL_FLOPS_CONVENTION


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="sizes"):
        causal_attention_flops(0, 1, 1, 1)
