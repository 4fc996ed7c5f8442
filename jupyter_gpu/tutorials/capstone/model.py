"""The capstone GPT: the tutorial GPT's architecture with every dimension free, in two attentions.

Llama style, like :mod:`jupyter_gpu.tutorials.gpt`: pre-norm blocks with RMSNorm, rotary
position embeddings, a SwiGLU feed-forward layer of any hidden width, no biases, the output
layer tied to the token embedding. Attention is either written out by hand, as a student
first writes it (scores, causal mask, softmax, weighted sum: the ``T x T`` scores are
materialised and kept for the backward pass), or PyTorch's fused
``scaled_dot_product_attention``, which picks one of its kernels (cuDNN's attention,
FlashAttention-2, memory-efficient attention, the plain math) by an order of priority and by
what each supports for the inputs (``priority_order`` and the ``can_use_*`` checks in
``aten/src/ATen/native/transformers/cuda/sdp_utils.cpp``): a new head width can change the
kernel. :meth:`CapstoneGPT.use_attention_backend` pins one
(``torch.nn.attention.sdpa_kernel`` around the call), so that a change of shape and a change
of kernel are measured apart.

:meth:`CapstoneGPT.compile_blocks` compiles each block on its own (*regional compilation*): the
blocks share their code, so torch.compile compiles one block and reuses it for the others, which
cuts the compile time of a deep model to about that of one block.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.checkpoint import checkpoint

from jupyter_gpu.tutorials.gpt import GPT, apply_rope, logits_or_loss, rope_tables

from .shapes import ModelShape

#: The compile mode that autotunes matrix products: max-autotune's GEMM tuning alone.
GEMM_AUTOTUNE = "max-autotune-gemm"
#: The SDPA kernels a block's attention can be pinned to, by the names the notebook prints.
ATTENTION_BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "math": SDPBackend.MATH,
}


def release_cuda_graphs() -> None:
    """Free every CUDA graph ``mode="reduce-overhead"`` recorded, with its memory pool.

    The graphs' pool stays reserved after their compiled blocks are set aside: a step at a batch
    sized to the memory would then run out of it. ``torch._dynamo.reset()`` frees them too (it
    calls this same ``reset_cudagraph_trees`` in ``torch/_inductor/cudagraph_trees.py``), but it
    also drops every compiled block, which would all compile again.
    """
    from torch._inductor.cudagraph_trees import reset_cudagraph_trees

    reset_cudagraph_trees()


def compile_options(mode: str, backend: str) -> dict[str, Any]:
    """``torch.compile`` keyword arguments for a capstone compile mode.

    Every mode compiles with ``dynamic=False``: the climb runs the same blocks at several batch
    sizes, side by side (a row is timed against the row before, interleaved), and a second
    batch size would otherwise make Dynamo recompile the blocks with a dynamic batch dimension
    (``automatic_dynamic_shapes``), a slower kernel for both. Each size gets its own graph.

    GEMM_AUTOTUNE is inductor's ``max_autotune_gemm``: it times Triton's matrix-product
    templates against cuBLAS for every matrix product, the part of ``max-autotune`` that speaks
    to a matmul-bound model. The whole mode also tunes every pointwise and reduction kernel
    (``max_autotune_pointwise``, ``coordinate_descent_tuning``): at the 16 GB tier on the H200,
    beside other work, that ran past the notebook's 5-minute cell limit (GPU run 22 of
    2026-12-02). Candidates are timed in a subprocess (``autotune_in_subproc``): a candidate that
    crashes is dropped instead of taking the process's CUDA context down with it (the capstone
    probe's max-autotune hit "an illegal memory access" in a Triton mm template, run 20). Other
    modes pass through as ``mode``; a backend other than inductor gets no options.
    """
    if backend != "inductor" or mode == "default":
        return {"backend": backend, "dynamic": False}
    if mode == GEMM_AUTOTUNE:
        tuning = {"max_autotune_gemm": True, "autotune_in_subproc": True}
        return {"backend": backend, "dynamic": False, "options": tuning}
    return {"backend": backend, "dynamic": False, "mode": mode}


class Attention(nn.Module):
    """Causal multi-head self-attention, by hand (``sdpa = False``) or fused (``sdpa = True``)."""

    def __init__(self, shape: ModelShape, *, sdpa: bool) -> None:
        super().__init__()
        self.n_head = shape.n_head
        self.sdpa = sdpa
        #: An SDPA kernel the call is pinned to (a key of ATTENTION_BACKENDS); None: SDPA picks.
        self.backend: str | None = None
        self.qkv = nn.Linear(shape.d_model, 3 * shape.d_model, bias=False)
        self.proj = nn.Linear(shape.d_model, shape.d_model, bias=False)
        # The student's causal mask: a lower-triangular buffer, as nanoGPT's first version has.
        mask = torch.tril(torch.ones(shape.seq_len, shape.seq_len, dtype=torch.bool))
        self.mask: torch.Tensor
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        head_dim = width // self.n_head
        q, k, v = self.qkv(x).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.n_head, head_dim).transpose(1, 2) for t in (q, k, v))
        q, k = apply_rope(q, rope), apply_rope(k, rope)
        if self.sdpa and self.backend is not None:
            with sdpa_kernel(ATTENTION_BACKENDS[self.backend]):
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(head_dim)
            scores = scores.masked_fill(~self.mask[:length, :length], float("-inf"))
            y = torch.softmax(scores, dim=-1) @ v
        out: torch.Tensor = self.proj(y.transpose(1, 2).reshape(batch, length, width))
        return out


class SwiGLU(nn.Module):
    """``down(silu(gate(x)) * up(x))``, gate and up in one matrix of ``2 x mlp_hidden`` rows."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.fc = nn.Linear(shape.d_model, 2 * shape.mlp_hidden, bias=False)
        self.proj = nn.Linear(shape.mlp_hidden, shape.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.fc(x).chunk(2, dim=-1)
        out: torch.Tensor = self.proj(F.silu(gate) * up)
        return out


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, shape: ModelShape, *, sdpa: bool) -> None:
        super().__init__()
        self.ln1 = nn.RMSNorm(shape.d_model)
        self.attn = Attention(shape, sdpa=sdpa)
        self.ln2 = nn.RMSNorm(shape.d_model)
        self.mlp = SwiGLU(shape)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), rope)
        out: torch.Tensor = x + self.mlp(self.ln2(x))
        return out


class CapstoneGPT(nn.Module):
    """Decoder-only transformer over bytes (plus special tokens) of any :class:`ModelShape`.

    ``model(idx)`` gives logits ``(batch, length, vocab)``; ``model(idx, targets)`` the mean
    cross-entropy. ``checkpointing = True`` recomputes each block's activations in the backward
    pass instead of keeping them (``torch.utils.checkpoint``, non-reentrant).
    """

    checkpointing: bool = False

    def __init__(self, shape: ModelShape, *, sdpa: bool = False) -> None:
        super().__init__()
        self.shape = shape
        self.wte = nn.Embedding(shape.vocab_size, shape.d_model)
        self.rope: torch.Tensor
        self.register_buffer("rope", rope_tables(shape.seq_len, shape.head_dim), persistent=False)
        self.blocks = nn.ModuleList(Block(shape, sdpa=sdpa) for _ in range(shape.n_layer))
        self.ln_f = nn.RMSNorm(shape.d_model)
        self.lm_head = nn.Linear(shape.d_model, shape.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: one matrix reads and writes tokens
        self.apply(GPT._init_weights)
        for name, param in self.named_parameters():  # GPT-2's scaled init of residual writes
            if name.endswith("proj.weight"):
                nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * shape.n_layer))
        # Regional compilation: one compiled wrapper per block (not registered as submodules:
        # they hold the same parameters as self.blocks).
        self._compiled_blocks: list[Any] | None = None

    @property
    def sdpa(self) -> bool:
        """Whether attention is ``scaled_dot_product_attention`` (else written out by hand)."""
        return all(m.sdpa for m in self.modules() if isinstance(m, Attention))

    def use_sdpa(self, enabled: bool = True) -> None:
        """Switch every block's attention to the fused kernel (or back to the hand-written one)."""
        for module in self.modules():
            if isinstance(module, Attention):
                module.sdpa = enabled

    @property
    def attention_backend(self) -> str | None:
        """The SDPA kernel every block's attention is pinned to, or ``None`` (SDPA picks)."""
        found = {m.backend for m in self.modules() if isinstance(m, Attention)}
        return found.pop() if len(found) == 1 else None

    def use_attention_backend(self, name: str | None) -> None:
        """Pin every block's SDPA call to one kernel (``"flash"``, ``"cudnn"``...), or unpin.

        Raises:
            ValueError: a name that is not a key of :data:`ATTENTION_BACKENDS`.
        """
        if name is not None and name not in ATTENTION_BACKENDS:
            names = ", ".join(ATTENTION_BACKENDS)
            raise ValueError(f"attention backend {name!r}: use one of {names}")
        for module in self.modules():
            if isinstance(module, Attention):
                module.backend = name

    def compile_blocks(self, **options: Any) -> None:
        """Compile each block with ``torch.compile(block, **options)`` (regional compilation)."""
        self._compiled_blocks = [torch.compile(block, **options) for block in self.blocks]

    def uncompile_blocks(self) -> None:
        """Run the eager blocks again."""
        self._compiled_blocks = None

    @property
    def compiled_blocks(self) -> list[Any] | None:
        """The compiled blocks in use (``None``: the eager ones), to switch back to later."""
        return self._compiled_blocks

    @compiled_blocks.setter
    def compiled_blocks(self, compiled: list[Any] | None) -> None:
        self._compiled_blocks = compiled

    @contextlib.contextmanager
    def blocks_compiled_as(self, compiled: list[Any] | None) -> Iterator[None]:
        """Run ``compiled`` (a former :attr:`compiled_blocks`; ``None``: eager) inside."""
        saved = self._compiled_blocks
        self._compiled_blocks = compiled
        try:
            yield
        finally:
            self._compiled_blocks = saved

    @contextlib.contextmanager
    def _attention_setting_kept(self, setting: str) -> Iterator[None]:
        """Each attention layer's ``setting`` (an attribute) as it was, put back after the block."""
        saved = [(m, getattr(m, setting)) for m in self.modules() if isinstance(m, Attention)]
        try:
            yield
        finally:
            for module, value in saved:
                setattr(module, setting, value)

    @contextlib.contextmanager
    def attention_written_out(self) -> Iterator[None]:
        """The hand-written attention inside, whatever was in use before (put back after)."""
        with self._attention_setting_kept("sdpa"):
            self.use_sdpa(False)
            yield

    @contextlib.contextmanager
    def attention_pinned(self, name: str | None) -> Iterator[None]:
        """SDPA pinned to ``name`` inside (``None``: SDPA picks); the former pins put back."""
        with self._attention_setting_kept("backend"):
            self.use_attention_backend(name)
            yield

    @property
    def blocks_compiled(self) -> bool:
        """Whether :meth:`compile_blocks` is in effect."""
        return self._compiled_blocks is not None

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        if idx.shape[1] > self.shape.seq_len:
            raise ValueError(f"{idx.shape[1]} tokens is longer than seq_len {self.shape.seq_len}")
        x = self.wte(idx)
        runs = self._compiled_blocks if self._compiled_blocks is not None else self.blocks
        for block in runs:
            if self.checkpointing and torch.is_grad_enabled():
                # The blocks draw no random numbers (no dropout): there is no RNG state to
                # replay, and saving it would make a first CUDA use inside the checkpointed
                # forward an error (a CPU model on a GPU machine, GPU run 3 of 2026-12-01).
                x = checkpoint(block, x, self.rope, use_reentrant=False, preserve_rng_state=False)
            else:
                x = block(x, self.rope)
        return logits_or_loss(self.lm_head(self.ln_f(x)), targets)

    n_params = GPT.n_params  # trainable parameters, the tied embedding counted once
