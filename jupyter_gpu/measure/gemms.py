"""The matrix products (GEMMs) of a training step, listed from a model's ``Linear`` layers.

A ``Linear(in, out)`` applied to ``T`` tokens (every position of every sequence) runs three
products in a training step, in the layouts torch issues them (``torch.nn.functional.linear`` and
its backward, ``aten/src/ATen/native/LinearAlgebra.cpp``):

- forward, ``Y = X @ W.t()``: ``M = T, N = out, K = in``, the second operand transposed;
- gradient of the input, ``dX = dY @ W``: ``M = T, N = in, K = out``;
- gradient of the weight, ``dW = dY.t() @ X``: ``M = out, N = in, K = T``, the first transposed.

Each is ``2 T in out`` FLOPs, ``6 T in out`` together: the ``6 N`` of the model-FLOPs convention
(``jupyter_gpu/tutorials/flops.py``). Attention's own products (``Q K^T``, ``P V``) run inside the
attention kernel (flash or cuDNN attention), not as GEMMs, and are not listed; nor are a
hand-written attention's batched products, which are not ``Linear`` layers.

:func:`model_gemms` assumes every ``Linear`` sees every token of the batch, as in a transformer;
for a model with a head on pooled features, list its products with :func:`linear_gemms` yourself.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn

#: The dtypes a GEMM is timed in (``tf32``: fp32 tensors with TF32 allowed by the caller).
GEMM_DTYPES = ("fp32", "tf32", "bf16", "fp16")
#: Bytes per element of each dtype's operands.
ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}


@dataclass(frozen=True)
class GemmShape:
    """One matrix product ``C[M, N] = A[M, K] @ B[K, N]``, run ``count`` times a step.

    Attributes:
        m, n, k: the product's sizes.
        dtype: one of :data:`GEMM_DTYPES`.
        count: how many times a step runs it (layers that share a shape).
        a_transposed: ``A`` is a transposed view (stored ``K x M``), as ``dY.t()`` is.
        b_transposed: ``B`` is a transposed view (stored ``N x K``), as ``W.t()`` is.
        label: where it comes from (``"blocks.*.mlp.fc forward"``).

    Raises:
        ValueError: a size or count below 1, or an unknown dtype.
    """

    m: int
    n: int
    k: int
    dtype: str
    count: int = 1
    a_transposed: bool = False
    b_transposed: bool = False
    label: str = ""

    def __post_init__(self) -> None:
        if min(self.m, self.n, self.k, self.count) < 1:
            raise ValueError(f"sizes and count must be at least 1: {self}")
        if self.dtype not in GEMM_DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(GEMM_DTYPES)}, not {self.dtype!r}")

    @property
    def flops(self) -> int:
        """FLOPs of one product: ``2 M N K`` (a multiply and an add per term)."""
        return 2 * self.m * self.n * self.k

    @property
    def step_flops(self) -> int:
        """FLOPs of the ``count`` products a step runs."""
        return self.flops * self.count

    @property
    def key(self) -> tuple[int, int, int, str, bool, bool]:
        """What makes two products the same kernel call: sizes, dtype, layout."""
        return (self.m, self.n, self.k, self.dtype, self.a_transposed, self.b_transposed)

    def operand_bytes(self) -> tuple[int, int, int]:
        """Bytes of ``A``, ``B`` and ``C``."""
        size = ELEMENT_BYTES[self.dtype]
        return self.m * self.k * size, self.k * self.n * size, self.m * self.n * size

    def describe(self) -> str:
        """``131072x6144x2048 bf16 (A.B^T) x8: blocks.*.attn.qkv forward``."""
        layout = f"({'A^T' if self.a_transposed else 'A'}.{'B^T' if self.b_transposed else 'B'})"
        times = f" x{self.count}" if self.count > 1 else ""
        label = f": {self.label}" if self.label else ""
        return f"{self.m}x{self.n}x{self.k} {self.dtype} {layout}{times}{label}"


def square_gemm(size: int, dtype: str) -> GemmShape:
    """The square product ``size x size x size`` (what notebook 00 times)."""
    return GemmShape(size, size, size, dtype, label=f"square {size}")


def linear_gemms(
    in_features: int,
    out_features: int,
    tokens: int,
    dtype: str,
    *,
    count: int = 1,
    label: str = "",
    backward: bool = True,
) -> tuple[GemmShape, ...]:
    """The products of one ``Linear(in_features, out_features)`` over ``tokens`` rows.

    The forward product, and with ``backward`` the two gradient products (the module's doc).
    """
    name = f"{label} " if label else ""
    forward = GemmShape(
        tokens, out_features, in_features, dtype, count, b_transposed=True, label=f"{name}forward"
    )
    if not backward:
        return (forward,)
    return (
        forward,
        GemmShape(tokens, in_features, out_features, dtype, count, label=f"{name}grad input"),
        GemmShape(
            out_features,
            in_features,
            tokens,
            dtype,
            count,
            a_transposed=True,
            label=f"{name}grad weight",
        ),
    )


def merge_gemms(gemms: Iterable[GemmShape]) -> tuple[GemmShape, ...]:
    """Products of one key (sizes, dtype, layout) as one, their counts summed, in first order.

    Labels that differ are joined with ``" / "``.
    """
    merged: dict[tuple[int, int, int, str, bool, bool], GemmShape] = {}
    for gemm in gemms:
        seen = merged.get(gemm.key)
        if seen is None:
            merged[gemm.key] = gemm
            continue
        labels = seen.label.split(" / ")
        label = seen.label if gemm.label in labels else f"{seen.label} / {gemm.label}"
        merged[gemm.key] = replace(seen, count=seen.count + gemm.count, label=label)
    return tuple(merged.values())


def _pattern(name: str) -> str:
    """``blocks.3.mlp.fc`` -> ``blocks.*.mlp.fc``: layers of one kind share a label."""
    return re.sub(r"(?<=\.)\d+(?=\.|$)|^\d+(?=\.)", "*", name)


def model_gemms(
    model: nn.Module, batch_shape: Sequence[int], dtype: str, *, backward: bool = True
) -> tuple[GemmShape, ...]:
    """The GEMMs of one training step of ``model``, from its ``Linear`` layers.

    Args:
        model: the model; each ``torch.nn.Linear`` in ``model.modules()`` counts once (a module
            used twice in a forward pass is listed once: list such products yourself).
        batch_shape: the leading dimensions of the inputs the layers see, e.g.
            ``(batch, seq_len)``: every layer sees their product of rows.
        dtype: the dtype the products run in (``"bf16"`` under bf16 autocast).
        backward: list the two gradient products of each layer too (a training step).

    Raises:
        ValueError: an empty or non-positive batch shape, or an unknown dtype.
    """
    from torch import nn

    if not batch_shape or min(batch_shape) < 1:
        raise ValueError(
            f"batch_shape must be positive sizes, e.g. (batch, seq_len): {batch_shape}"
        )
    tokens = math.prod(batch_shape)
    found: list[GemmShape] = []
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            found.extend(
                linear_gemms(
                    module.in_features,
                    module.out_features,
                    tokens,
                    dtype,
                    label=_pattern(name),
                    backward=backward,
                )
            )
    return merge_gemms(found)


def step_flops(gemms: Iterable[GemmShape]) -> int:
    """FLOPs of a step's products (each shape's ``count`` times)."""
    return sum(g.step_flops for g in gemms)
