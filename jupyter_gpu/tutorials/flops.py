"""Model FLOPs of a training step, counted from the model's shape (not from a profiler).

The convention is the one behind "model FLOPs utilization" (PaLM, nanoGPT): a training step
does 6 FLOPs per matrix weight per token (2 in the forward pass, 4 in the backward pass), plus
attention's two matrix products per layer (scores ``QK^T`` and ``softmax @ V``: ``2 * 2 * T * d``
FLOPs per token forward, three times that with the backward pass, so ``12 * L * d * T``). The
causal mask is not subtracted, as in that convention. Work that is not a matrix product
(LayerNorm, GELU, softmax, the optimizer) is not counted: it is what fusion makes cheaper, not
useful work. Every place that prints MFU states this convention (:data:`MODEL_FLOPS_CONVENTION`).

An attention *kernel's* rate is another matter: a causal flash or cuDNN attention kernel skips
the blocks above the diagonal, so the work it did is about half of what the model-FLOPs
convention counts for it. :func:`causal_attention_flops` counts that work (its own convention,
stated there); it is for a kernel's achieved FLOP/s, never for MFU.
"""

from __future__ import annotations

import itertools

from .gpt import GPTConfig

#: How model FLOPs are counted here, in the words every MFU figure is printed with.
MODEL_FLOPS_CONVENTION = (
    "6 N + 12 L d T per token (N the weights in matrix products; attention's two products "
    "counted whole, the causal mask not subtracted, as in PaLM's MFU)"
)


def gpt_matmul_params(config: GPTConfig) -> int:
    """Weights that take part in matrix products: every ``Linear`` plus the tied output layer.

    The position embedding (gpt2 style) is a lookup (no FLOPs); the token embedding counts
    once, as the output layer it is tied to. Norm weights are left out (no matrix product),
    and so is RoPE's rotation (elementwise).
    """
    d, hidden = config.d_model, config.mlp_hidden
    mlp_in = (2 if config.style == "llama" else 1) * d * hidden  # SwiGLU: gate and up
    per_layer = 3 * d * d + d * d + mlp_in + hidden * d  # qkv, attention proj, MLP in, out
    return config.n_layer * per_layer + config.vocab_size * d


def gpt_train_flops_per_token(config: GPTConfig, seq_len: int | None = None) -> int:
    """FLOPs per token of one forward + backward pass: ``6 N + 12 L d T``.

    ``N`` is :func:`gpt_matmul_params`, ``L`` layers, ``d`` the width, ``T`` the sequence
    length (``config.context`` unless given).
    """
    length = config.context if seq_len is None else seq_len
    return 6 * gpt_matmul_params(config) + 12 * config.n_layer * config.d_model * length


def mlp_train_flops_per_sample(widths: list[int]) -> int:
    """FLOPs per sample of forward + backward through ``Linear`` layers of these widths.

    ``widths`` lists the input width then each layer's output width; ``6 * sum(in * out)``.
    """
    return 6 * sum(a * b for a, b in itertools.pairwise(widths))


def tflops(flops: float, seconds: float) -> float:
    """TFLOP/s (10^12 FLOPs per second).

    Raises:
        ValueError: ``seconds`` is not positive.
    """
    if seconds <= 0:
        raise ValueError(f"seconds must be positive, not {seconds}")
    return flops / seconds / 1e12


def causal_attention_flops(
    batch: int,
    heads: int,
    seq_len: int,
    head_dim: int,
    *,
    forward_passes: int = 1,
    backward: bool = True,
    causal: bool = True,
) -> int:
    """FLOPs a fused attention kernel does: what a per-kernel TFLOP/s should divide.

    The convention (FlashAttention's benchmarks, ``benchmarks/benchmark_flash_attention.py`` in
    Dao-AILab/flash-attention, with the mask counted exactly):

    - forward: ``Q K^T`` and ``P V`` over the query-key pairs the mask keeps, ``2 * head_dim``
      FLOPs per pair each: ``4 * head_dim * pairs`` per sequence and head, where ``pairs`` is
      ``T (T + 1) / 2`` for a causal mask (each query and the keys up to it, the diagonal
      included) and ``T^2`` without one. FlashAttention's own count uses ``T^2 / 2`` for causal;
      the two differ by ``1 / T``.
    - backward: 2.5 times the forward: the kernel recomputes ``Q K^T`` and runs four gradient
      products (``dV``, ``dP``, ``dQ``, ``dK``), five products against the forward's two.

    A kernel that works in tiles also computes the masked half of each diagonal tile and throws
    it away; that work is not counted (it depends on the tile size, which the profile does not
    show), so the rate is the useful work's, a little below what the tensor cores did.

    Args:
        batch: sequences.
        heads: attention heads per layer (one layer: multiply by the layers yourself).
        seq_len: ``T``.
        head_dim: the width of one head.
        forward_passes: forward passes per step (2 with activation checkpointing, which runs
            the forward again in the backward pass).
        backward: count the backward pass.
        causal: the kernel skips the masked pairs (``is_causal=True``); ``False`` counts all.

    Raises:
        ValueError: a size below 1 or ``forward_passes`` below 0.
    """
    if min(batch, heads, seq_len, head_dim) < 1 or forward_passes < 0:
        raise ValueError(
            f"need sizes >= 1 and forward_passes >= 0: {batch=}, {heads=}, {seq_len=}, "
            f"{head_dim=}, {forward_passes=}"
        )
    pairs = seq_len * (seq_len + 1) // 2 if causal else seq_len * seq_len
    forward = 4 * head_dim * pairs * batch * heads
    # 2.5 x forward, kept in integers: 5 products against the forward's 2.
    return forward_passes * forward + (5 * forward // 2 if backward else 0)
