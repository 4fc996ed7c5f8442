"""The capstone's model shapes: the one a student writes, the one that feeds the tensor cores.

A student picks round decimal numbers: at the 80gb tier ``d_model`` 2000, heads of 100, a SwiGLU
hidden width of ``int(8 * d / 3)`` (5333: odd) and a vocabulary of 256 bytes plus 3 special
tokens (259: odd). The final shape keeps the layers and the sequence length and makes every
dimension a multiple of 64 or 128: at that tier ``d_model`` 2048, heads of 128, the hidden width
rounded up to a multiple of 128 (5504), the vocabulary padded to 384 (the extra rows are never
used as inputs). The other tiers' widths are in :data:`FINAL_SPECS` (the student's is the final
width rounded down to hundreds: 1000 at 16gb and 24gb, 1500 at 40gb, 200 on a CPU).

The final shape is a parameter: ``JUPYTER_GPU_CAPSTONE_SHAPE=d2048-hd128-l8-t2048`` (width, head
width, layers, sequence length; what ``benchmarks/capstone_probe.py`` prints for its winner)
replaces the preset of the tier, and the student's shape follows from it.

Model FLOPs (the convention of :mod:`jupyter_gpu.tutorials.flops`): ``6 N + 12 L d T`` per
token of a training step, ``N`` the weights of the matrix products (the tied output layer once).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from jupyter_gpu.measure.gemms import GemmShape, linear_gemms, merge_gemms

SHAPE_ENV = "JUPYTER_GPU_CAPSTONE_SHAPE"
AUTOTUNE_ENV = "JUPYTER_GPU_CAPSTONE_AUTOTUNE"
BYTES = 256
SPECIAL_TOKENS = 3  # PAD, BOS and MASK (the augmentation's noise token)
STUDENT_VOCAB = BYTES + SPECIAL_TOKENS
MASK_ID = BYTES + 2
_SPEC = re.compile(r"^d(\d+)-hd(\d+)-l(\d+)-t(\d+)$")


def round_up(value: int, multiple: int) -> int:
    """The smallest multiple of ``multiple`` that is at least ``value``."""
    return -(-value // multiple) * multiple


@dataclass(frozen=True)
class ModelShape:
    """Every dimension of the capstone GPT (llama style: RMSNorm, RoPE, SwiGLU, tied embedding).

    Raises:
        ValueError: a dimension is below 1, ``d_model`` does not divide by ``n_head``, or the
            head width is odd (RoPE rotates pairs of channels).
    """

    vocab_size: int
    d_model: int
    n_head: int
    mlp_hidden: int
    n_layer: int
    seq_len: int

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")
        if self.d_model % self.n_head or self.head_dim % 2:
            raise ValueError(
                f"d_model {self.d_model} must divide by n_head {self.n_head} into an even "
                "head width"
            )

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.d_model // self.n_head

    def matmul_params(self) -> int:
        """Weights in matrix products: q, k, v, out, SwiGLU's gate, up and down; the head once."""
        d, h = self.d_model, self.mlp_hidden
        return self.n_layer * (4 * d * d + 3 * d * h) + self.vocab_size * d

    def train_flops_per_token(self) -> int:
        """``6 N + 12 L d T``: forward and backward, attention's two products counted whole."""
        return 6 * self.matmul_params() + 12 * self.n_layer * self.d_model * self.seq_len

    def gemms(self, batch: int, dtype: str) -> tuple[GemmShape, ...]:
        """The matrix products of one training step of ``batch`` sequences, from the shape.

        Per layer: q/k/v (one ``Linear``), attention's output, SwiGLU's gate-and-up and its
        down projection; then the output layer (tied to the embedding, a product once). Each
        forward, gradient-of-input and gradient-of-weight, in the layouts and with the labels of
        :func:`jupyter_gpu.measure.gemms.model_gemms` on a :class:`.model.CapstoneGPT` of this
        shape. Attention's own products run in its kernel and are not listed.
        """
        tokens = batch * self.seq_len
        d, hidden = self.d_model, self.mlp_hidden
        layers = (
            ("blocks.*.attn.qkv", d, 3 * d),
            ("blocks.*.attn.proj", d, d),
            ("blocks.*.mlp.fc", d, 2 * hidden),
            ("blocks.*.mlp.proj", hidden, d),
        )
        found: list[GemmShape] = []
        for label, width_in, width_out in layers:
            found += linear_gemms(
                width_in, width_out, tokens, dtype, count=self.n_layer, label=label
            )
        found += linear_gemms(d, self.vocab_size, tokens, dtype, label="lm_head")
        return merge_gemms(found)

    def misaligned(self) -> list[str]:
        """The dimensions that are not multiples of 64, as ``"mlp_hidden 5333"``."""
        dims = {
            "vocabulary": self.vocab_size,
            "d_model": self.d_model,
            "head_dim": self.head_dim,
            "mlp_hidden": self.mlp_hidden,
        }
        return [f"{name} {value}" for name, value in dims.items() if value % 64]

    def spec(self) -> str:
        """``d2048-hd128-l8-t2048``: what :func:`final_shape_from_spec` reads back."""
        return f"d{self.d_model}-hd{self.head_dim}-l{self.n_layer}-t{self.seq_len}"

    def describe(self) -> str:
        """One line with every dimension."""
        return (
            f"{self.n_layer} layers, d_model {self.d_model}, {self.n_head} heads of "
            f"{self.head_dim}, SwiGLU hidden {self.mlp_hidden}, vocabulary {self.vocab_size}, "
            f"sequences of {self.seq_len} tokens"
        )

    def as_dict(self) -> dict[str, int]:
        """JSON-ready fields."""
        return asdict(self)


def final_shape(d_model: int, head_dim: int, n_layer: int, seq_len: int) -> ModelShape:
    """The shape that feeds the tensor cores: hidden width and vocabulary rounded up to 128.

    Raises:
        ValueError: ``d_model`` does not divide by ``head_dim``, or a dimension is below 1.
    """
    if head_dim < 2 or d_model % head_dim:
        raise ValueError(f"d_model {d_model} must divide by head_dim {head_dim}")
    return ModelShape(
        vocab_size=round_up(STUDENT_VOCAB, 128),
        d_model=d_model,
        n_head=d_model // head_dim,
        mlp_hidden=round_up(math.ceil(8 * d_model / 3), 128),
        n_layer=n_layer,
        seq_len=seq_len,
    )


def student_shape(final: ModelShape) -> ModelShape:
    """What a student writes for the same model: round numbers and ``int(8 * d / 3)``.

    The width rounded down to hundreds (at least 100), heads of 100 (or 50 below a width of
    200), and 256 bytes plus 3 special tokens; the same layers and sequence length.
    """
    width = max(100, final.d_model - final.d_model % 100)
    head = 100 if width >= 200 else 50
    return ModelShape(
        vocab_size=STUDENT_VOCAB,
        d_model=width,
        n_head=width // head,
        mlp_hidden=int(8 * width / 3),
        n_layer=final.n_layer,
        seq_len=final.seq_len,
    )


def final_shape_from_spec(spec: str) -> ModelShape:
    """The final shape named ``d<width>-hd<head width>-l<layers>-t<sequence>``.

    Raises:
        ValueError: the text is not in that form, or names an impossible shape.
    """
    match = _SPEC.match(spec.strip().lower())
    if match is None:
        raise ValueError(
            f"{SHAPE_ENV}={spec!r}: write d<width>-hd<head width>-l<layers>-t<sequence>, "
            "e.g. d2048-hd128-l8-t2048"
        )
    d, hd, layers, seq = (int(g) for g in match.groups())
    return final_shape(d, hd, layers, seq)


# The final shape by run mode and, on a GPU, by size tier (jupyter_gpu.tutorials.tiers). The
# 80gb shape is the one benchmarks/capstone_probe.py is to confirm on an H200.
FINAL_SPECS: dict[str, str] = {
    "smoke": "d128-hd64-l2-t64",
    "cpu": "d256-hd64-l4-t256",
    "16gb": "d1024-hd128-l8-t1024",
    "24gb": "d1024-hd128-l8-t2048",
    "40gb": "d1536-hd128-l8-t2048",
    "80gb": "d2048-hd128-l8-t2048",
}
# The batch the student asks for before halving it by hand until a step fits.
REQUESTED_BATCH: dict[str, int] = {"smoke": 8, "cpu": 8}
GPU_REQUESTED_BATCH = 32


@dataclass(frozen=True)
class CapstoneSizes:
    """What the capstone trains: both shapes, the batch asked for, whether to try max-autotune.

    Attributes:
        final: the shape that feeds the tensor cores (section 9).
        student: the shape the run starts with.
        requested_batch: the batch the student asks for (halved until a step fits).
        autotune: measure max-autotune's GEMM tuning (``model.GEMM_AUTOTUNE``) as well (GPU
            only, and only with ``JUPYTER_GPU_CAPSTONE_AUTOTUNE=1``: the first step of the final
            shape took 184.4 s with it, of a notebook that ran 366 s, and its row was not kept, on
            one H200 at the emulated 16gb tier (benchmarks/RESULTS.md, *Capstone at the 16gb
            tier, emulated on one H200*, 2026-12-03), so the notebook's 10 minutes leave it out
            unless asked).
        from_env: the final shape came from ``JUPYTER_GPU_CAPSTONE_SHAPE``.
    """

    final: ModelShape
    student: ModelShape
    requested_batch: int
    autotune: bool
    from_env: bool


def capstone_sizes(
    mode: str, tier: str | None = None, environ: Mapping[str, str] | None = None
) -> CapstoneSizes:
    """The sizes for a run mode (``smoke``, ``cpu``, ``gpu``) and, on a GPU, its tier.

    Raises:
        ValueError: ``JUPYTER_GPU_CAPSTONE_SHAPE`` is malformed, or the mode or tier is unknown.
    """
    env = os.environ if environ is None else environ
    key = tier if mode == "gpu" else mode
    if key not in FINAL_SPECS:
        raise ValueError(f"no capstone sizes for mode {mode!r}, tier {tier!r}")
    override = env.get(SHAPE_ENV, "").strip()
    final = final_shape_from_spec(override or FINAL_SPECS[key])
    autotune = mode == "gpu" and env.get(AUTOTUNE_ENV, "0").strip().lower() in ("1", "yes")
    return CapstoneSizes(
        final=final,
        student=student_shape(final),
        requested_batch=REQUESTED_BATCH.get(mode, GPU_REQUESTED_BATCH),
        autotune=autotune,
        from_env=bool(override),
    )
