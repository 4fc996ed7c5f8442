"""A small GPT (decoder-only transformer) for byte-level language modelling, in two styles.

- ``style="llama"`` (the notebooks' default): RMSNorm, rotary position embeddings (RoPE) and a
  SwiGLU feed-forward layer, as in Llama and most current LLMs. In eager mode each of these is
  a chain of small elementwise kernels, which is what torch.compile fuses.
- ``style="gpt2"``: LayerNorm, learned position embeddings and a tanh-GELU feed-forward layer.

Both: pre-norm blocks without biases, fused ``scaled_dot_product_attention`` (flash attention
on a GPU), the output layer tied to the token embedding, and sizes that suit tensor cores.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

Style = Literal["llama", "gpt2"]


@dataclass(frozen=True)
class GPTConfig:
    """The shape of a :class:`GPT`.

    Attributes:
        vocab_size: tokens in the vocabulary (256 for bytes).
        context: the longest sequence the model reads, in tokens.
        n_layer: transformer blocks.
        n_head: attention heads per block; ``d_model`` must divide by it (into an even width
            for RoPE).
        d_model: width of the residual stream.
        dropout: dropout probability (0 for the benchmarks: it costs time and changes nothing
            over a few hundred steps).
        style: ``"llama"`` or ``"gpt2"`` (see the module's docstring).
    """

    vocab_size: int = 256
    context: int = 256
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 256
    dropout: float = 0.0
    style: Style = "llama"

    def __post_init__(self) -> None:
        for name in ("vocab_size", "context", "n_layer", "n_head", "d_model"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.d_model % self.n_head or (self.d_model // self.n_head) % 2:
            raise ValueError(
                f"d_model ({self.d_model}) must divide by n_head ({self.n_head}) into an even "
                "head width"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), not {self.dropout}")
        if self.style not in ("llama", "gpt2"):
            raise ValueError(f"style must be 'llama' or 'gpt2', not {self.style!r}")

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.d_model // self.n_head

    @property
    def mlp_hidden(self) -> int:
        """Hidden width of the feed-forward layer.

        4 d with GELU; 8/3 d rounded up to a multiple of 64 with SwiGLU, which has three
        matrices instead of two (about the same FLOPs).
        """
        if self.style == "gpt2":
            return 4 * self.d_model
        return -(-8 * self.d_model // 3 // 64) * 64

    def describe(self) -> str:
        """One line: style, layers, width, heads, context."""
        return (
            f"{self.style}-style, {self.n_layer} layers, d_model {self.d_model}, {self.n_head} "
            f"heads of {self.head_dim}, context {self.context}, vocabulary {self.vocab_size}"
        )

    def as_dict(self) -> dict[str, float | int | str]:
        """JSON-ready fields."""
        return asdict(self)


def logits_or_loss(logits: torch.Tensor, targets: torch.Tensor | None) -> torch.Tensor:
    """``logits`` as they are, or with ``targets`` the mean next-token cross-entropy (in fp32)."""
    if targets is None:
        return logits
    return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.reshape(-1))


def rope_tables(context: int, head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """Cosines and sines of the rotary embedding: shape ``(2, context, head_dim // 2)``."""
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(context, dtype=torch.float32), inv_freq)
    return torch.stack([angles.cos(), angles.sin()])


def apply_rope(x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
    """Rotate channel pairs (i, i + head_dim/2) of ``x`` (``..., T, head_dim``) by position."""
    length = x.shape[-2]
    cos, sin = (t[:length].to(x.dtype) for t in rope)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where each position sees only itself and earlier ones."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.dropout = config.dropout
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.proj = nn.Linear(config.d_model, config.d_model, bias=False)

    def forward(self, x: torch.Tensor, rope: torch.Tensor | None) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        # (batch, length, width) -> (batch, heads, length, head_dim), the layout SDPA wants.
        q, k, v = (
            t.view(batch, length, self.n_head, width // self.n_head).transpose(1, 2)
            for t in (q, k, v)
        )
        if rope is not None:
            q, k = apply_rope(q, rope), apply_rope(k, rope)
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0
        )
        out: torch.Tensor = self.proj(y.transpose(1, 2).reshape(batch, length, width))
        return out


class MLP(nn.Module):
    """The block's feed-forward part: SwiGLU (``silu(gate) * up``) or GELU, then back to d."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.swiglu = config.style == "llama"
        hidden = config.mlp_hidden
        self.fc = nn.Linear(config.d_model, (2 if self.swiglu else 1) * hidden, bias=False)
        self.proj = nn.Linear(hidden, config.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        if self.swiglu:
            gate, up = h.chunk(2, dim=-1)
            h = F.silu(gate) * up
        else:
            h = F.gelu(h, approximate="tanh")
        out: torch.Tensor = self.proj(h)
        return out


def _norm(config: GPTConfig) -> nn.Module:
    if config.style == "llama":
        return nn.RMSNorm(config.d_model)
    return nn.LayerNorm(config.d_model, bias=False)


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln1 = _norm(config)
        self.attn = CausalSelfAttention(config)
        self.ln2 = _norm(config)
        self.mlp = MLP(config)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, rope: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.drop(self.attn(self.ln1(x), rope))
        out: torch.Tensor = x + self.drop(self.mlp(self.ln2(x)))
        return out


class GPT(nn.Module):
    """Decoder-only transformer over a byte vocabulary.

    ``model(idx)`` gives logits of shape ``(batch, length, vocab)``; ``model(idx, targets)``
    gives the mean cross-entropy loss (a scalar), so that a compiled model fuses the loss too.

    With ``checkpointing = True`` each block's activations are recomputed in the backward
    pass instead of kept (``torch.utils.checkpoint``): less memory, about one more forward
    pass of time.
    """

    checkpointing: bool = False

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.d_model)
        self.wpe = nn.Embedding(config.context, config.d_model) if config.style == "gpt2" else None
        rope = rope_tables(config.context, config.head_dim) if config.style == "llama" else None
        self.rope: torch.Tensor | None
        self.register_buffer("rope", rope, persistent=False)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = _norm(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: one matrix reads and writes tokens
        self.apply(self._init_weights)
        # GPT-2's scaled init for the layers that write into the residual stream.
        for name, param in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        length = idx.shape[1]
        if length > self.config.context:
            raise ValueError(
                f"sequence of {length} tokens is longer than the context ({self.config.context})"
            )
        x = self.wte(idx)
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(length, device=idx.device))
        x = self.drop(x)
        for block in self.blocks:
            if self.checkpointing and torch.is_grad_enabled():
                x = checkpoint(block, x, self.rope, use_reentrant=False)
            else:
                x = block(x, self.rope)
        return logits_or_loss(self.lm_head(self.ln_f(x)), targets)

    def n_params(self) -> int:
        """Trainable parameters, counting the tied embedding once."""
        return sum(p.numel() for p in self.parameters())

    @torch.no_grad()
    def generate(
        self,
        prompt: torch.Tensor,
        new_tokens: int,
        *,
        temperature: float = 0.8,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Sample ``new_tokens`` after ``prompt`` (1-D token ids); returns prompt + sample.

        Raises:
            ValueError: ``temperature`` is not positive.
        """
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, not {temperature}")
        was_training = self.training
        self.eval()
        device = self.wte.weight.device
        idx = prompt.to(device).long().view(1, -1)
        for _ in range(new_tokens):
            logits = self(idx[:, -self.config.context :])[:, -1, :].float() / temperature
            probs = torch.softmax(logits, dim=-1).cpu()
            nxt = torch.multinomial(probs, 1, generator=generator).to(device)
            idx = torch.cat([idx, nxt], dim=1)
        self.train(was_training)
        return idx[0].cpu()


@torch.no_grad()
def estimate_loss(
    model: GPT,
    tokens: torch.Tensor,
    *,
    batch: int,
    batches: int = 4,
    seed: int = 0,
    dtype: torch.dtype | None = None,
) -> float:
    """Mean loss over ``batches`` random batches of ``tokens`` (the same ones for a given seed).

    Evaluate the eager module, not a compiled one: a compiled model would compile again for
    ``no_grad`` mode. ``dtype`` runs it under autocast.
    """
    from .corpus import random_batch

    was_training = model.training
    model.eval()
    device = model.wte.weight.device
    gen = torch.Generator().manual_seed(seed)
    total = 0.0
    for _ in range(batches):
        x, y = random_batch(tokens, batch, model.config.context, gen)
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            total += float(model(x, y))
    model.train(was_training)
    return total / batches
