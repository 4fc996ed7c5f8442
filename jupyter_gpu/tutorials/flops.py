"""Model FLOPs of a training step, counted from the model's shape (not from a profiler).

The convention is the one behind "model FLOPs utilization" (PaLM, nanoGPT): a training step
does 6 FLOPs per matrix weight per token (2 in the forward pass, 4 in the backward pass), plus
attention's two matrix products per layer (scores ``QK^T`` and ``softmax @ V``: ``2 * 2 * T * d``
FLOPs per token forward, three times that with the backward pass, so ``12 * L * d * T``). The
causal mask is not subtracted, as in that convention. Work that is not a matrix product
(LayerNorm, GELU, softmax, the optimizer) is not counted: it is what fusion makes cheaper, not
useful work.
"""

from __future__ import annotations

import itertools

from .gpt import GPTConfig


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
