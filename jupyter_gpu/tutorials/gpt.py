"""A small GPT (decoder-only transformer) for byte-level language modelling.

Written for speed on tensor cores as well as for reading: pre-LayerNorm blocks without
biases, fused ``scaled_dot_product_attention`` (flash attention on the GPU), a tanh GELU, the
output layer tied to the token embedding, and sizes that are multiples of 64.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


@dataclass(frozen=True)
class GPTConfig:
    """The shape of a :class:`GPT`.

    Attributes:
        vocab_size: tokens in the vocabulary (256 for bytes).
        context: the longest sequence the model reads, in tokens.
        n_layer: transformer blocks.
        n_head: attention heads per block; ``d_model`` must divide by it.
        d_model: width of the residual stream.
        dropout: dropout probability (0 for the benchmarks: it costs time and changes nothing
            over a few hundred steps).
    """

    vocab_size: int = 256
    context: int = 256
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 256
    dropout: float = 0.0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "context", "n_layer", "n_head", "d_model"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model ({self.d_model}) must divide by n_head ({self.n_head})")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), not {self.dropout}")

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.d_model // self.n_head

    def describe(self) -> str:
        """One line: layers, width, heads, context."""
        return (
            f"{self.n_layer} layers, d_model {self.d_model}, {self.n_head} heads of "
            f"{self.head_dim}, context {self.context}, vocabulary {self.vocab_size}"
        )

    def as_dict(self) -> dict[str, float | int]:
        """JSON-ready fields."""
        return asdict(self)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where each position sees only itself and earlier ones."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.dropout = config.dropout
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.proj = nn.Linear(config.d_model, config.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        # (batch, length, width) -> (batch, heads, length, head_dim), the layout SDPA wants.
        q, k, v = (
            t.view(batch, length, self.n_head, width // self.n_head).transpose(1, 2)
            for t in (q, k, v)
        )
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0
        )
        out: torch.Tensor = self.proj(y.transpose(1, 2).reshape(batch, length, width))
        return out


class MLP(nn.Module):
    """The block's feed-forward part: widen 4x, GELU, narrow back."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(config.d_model, 4 * config.d_model, bias=False)
        self.proj = nn.Linear(4 * config.d_model, config.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.proj(F.gelu(self.fc(x), approximate="tanh"))
        return out


class Block(nn.Module):
    """Pre-LayerNorm transformer block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(config.d_model, bias=False)
        self.attn = CausalSelfAttention(config)
        self.ln2 = nn.LayerNorm(config.d_model, bias=False)
        self.mlp = MLP(config)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.attn(self.ln1(x)))
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
        self.wpe = nn.Embedding(config.context, config.d_model)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.d_model, bias=False)
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
        positions = torch.arange(length, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(positions))
        for block in self.blocks:
            if self.checkpointing and torch.is_grad_enabled():
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        logits: torch.Tensor = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.reshape(-1))

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
