"""Reading a ``%%profile`` result: syncs per step, the attention kernel, where GPU time goes.

The rows are ``%%profile -o``'s (:class:`jupyter_gpu.magics.profile.rows.OpRow`): GPU rows are
kernels and copies by the names the GPU ran them under, so a kernel's family shows in its name
(cuBLAS's ``nvjet``/``sm90_xmma`` GEMMs, ``flash_fwd``, cuDNN's ``..._sdpa_...``, Triton's
``triton_*`` kernels, fused Adam's ``fused_adam``/``multi_tensor_apply``, the softmax and mask
of an attention written out by hand). Shares are of the profile's window: whole periods of the
measured steps (``%%profile --steps``), start-up and the profiler's closing synchronise left out
(``docs/magics.md``, *The idle window*).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jupyter_gpu.measure.matmul_rate import NAME as MATMUL_RATE_NAME
from jupyter_gpu.measure.matmul_rate import MatmulRate
from jupyter_gpu.measure.peaks import PeakLookup
from jupyter_gpu.tutorials.flops import causal_attention_flops

from .shapes import ModelShape

# (kind, fragments of a kernel's name), tried in order: a Triton matmul template
# ("triton_tem_...") is a matrix product before it is a Triton kernel.
#: The family of an attention written out by hand: its softmax and its causal mask (its two
#: batched products are matrix products).
WRITTEN_OUT = "softmax and mask (attention written out)"
KERNEL_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("attention", ("flash", "fmha", "sdpa", "attention")),
    (WRITTEN_OUT, ("softmax", "masked_fill")),
    (
        "matrix products",
        ("gemm", "nvjet", "cutlass", "xmma", "triton_tem", "cublas", "splitk", "matmul"),
    ),
    ("optimizer", ("adam", "multi_tensor_apply")),
    ("fused by inductor (Triton)", ("triton",)),
    ("copies", ("memcpy", "memset")),
)
OTHER = "other kernels (eager elementwise, softmax, ...)"


def kernel_kind(name: str) -> str:
    """The family of a GPU kernel, from its name."""
    lowered = name.lower()
    for kind, fragments in KERNEL_KINDS:
        if any(f in lowered for f in fragments):
            return kind
    return OTHER


def gpu_time_by_kind(rows: Iterable[Any]) -> dict[str, float]:
    """Seconds of GPU time per kernel family, largest first (GPU rows only)."""
    totals: dict[str, float] = {}
    for row in rows:
        if row.on_gpu:
            kind = kernel_kind(row.name)
            totals[kind] = totals.get(kind, 0.0) + row.self_gpu_s
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def attention_kernels(rows: Iterable[Any]) -> list[str]:
    """Names of the GPU kernels that did attention, most GPU time first."""
    found = [r for r in rows if r.on_gpu and kernel_kind(r.name) == "attention"]
    return [r.name for r in sorted(found, key=lambda r: -r.self_gpu_s)]


def attention_backend_of(kernels: list[str]) -> str | None:
    """The SDPA kernel family that ran, from its kernels' names: ``"cudnn"``, ``"flash"``...

    cuDNN's attention kernels carry ``sdpa`` or ``cudnn`` in their names, FlashAttention's
    ``flash``, memory-efficient attention's ``fmha``/``efficient``; ``None`` when none of these
    shows (no GPU kernels, or attention written out).
    """
    text = " ".join(kernels).lower()
    for name, fragments in (
        ("cudnn", ("cudnn", "sdpa")),
        ("flash", ("flash",)),
        ("efficient", ("fmha", "efficient")),
    ):
        if any(f in text for f in fragments):
            return name
    return None


def syncs_per_step(profile: Any, steps: int) -> float:
    """Host synchronisations per training step in a profile of ``steps`` steps."""
    return float(profile.sync_count) / max(1, steps)


def window_s(profile: Any) -> float:
    """Seconds the shares are of: the measured steps' window, else the profiled wall time."""
    return float(getattr(profile, "window_s", 0.0) or profile.wall_s or 0.0)


def breakdown_text(profile: Any) -> str:
    """Where the measured steps' time went: GPU time by kernel family, then idle time by cause."""
    kinds = gpu_time_by_kind(profile.rows)
    if not kinds:
        return "no GPU kernels in this profile: nothing to split by kernel family"
    wall = window_s(profile) or 1.0
    parts = [f"{kind} {seconds / wall:.0%}" for kind, seconds in kinds.items()]
    idle = ", ".join(
        f"{cause} {seconds / wall:.0%}" for cause, seconds in profile.idle_s.items() if seconds
    )
    steps = getattr(profile, "steps", 0)
    of = f"{steps} steps ({wall * 1e3:.0f} ms)" if steps else "the profiled wall time"
    text = f"GPU time by kernel family, of {of}: " + ", ".join(parts)
    if profile.gpu_idle_fraction is not None:
        text += f"; idle {profile.gpu_idle_fraction:.0%}" + (f" ({idle})" if idle else "")
    return text


def largest_cost(profile: Any) -> tuple[str, float] | None:
    """The largest share of the measured steps besides the weights' matrix products.

    The candidates are each kernel family but the matrix products (the useful work, which only
    a format or a shape changes), the GPU's idle time by cause (``GPU idle, waiting on the
    host``...) and the DataLoader's time on the CPU (``profile.loader_s``). ``None`` without a
    window to take shares of, or without GPU kernels.
    """
    wall = window_s(profile)
    kinds = gpu_time_by_kind(profile.rows)
    if not wall or not kinds:  # no GPU kernels (a CPU run): no shares to rank
        return None
    costs = {k: s for k, s in kinds.items() if k != "matrix products"}
    names = {"host": "waiting on the host", "kernels": "between kernels", "copies": "on copies"}
    for cause, seconds in (getattr(profile, "idle_s", {}) or {}).items():
        costs[f"GPU idle, {names.get(cause, cause)}"] = seconds
    loader = getattr(profile, "loader_s", 0.0) or 0.0
    if loader:
        costs["the DataLoader (CPU time in its __next__)"] = loader
    if not costs:
        return None
    name, seconds = max(costs.items(), key=lambda item: item[1])
    return name, seconds / wall


def where_time_goes(profile: Any) -> str:
    """The breakdown, then the largest cost besides the matrix products (what to fix next)."""
    text = breakdown_text(profile)
    largest = largest_cost(profile)
    if largest is not None:
        name, share = largest
        text += f". Largest besides the weights' matrix products: {name}, {share:.0%}"
    return text


def efficiency_lines(
    profile: Any,
    shape: ModelShape,
    batch: int,
    steps: int,
    matmul_rate: MatmulRate | None,
    *,
    checkpointing: bool = False,
    fp8_peak: PeakLookup | None = None,
) -> list[str]:
    """How fast each family ran in a profile of ``steps`` training steps, and what is left.

    - The matrix products of the weights: their model FLOPs (``6 N`` per token) over the GEMM
      kernels' time, beside the matmul rate measured here on this model's GEMMs; for products
      that ran in FP8, beside the data-sheet dense FP8 peak instead (the rate measured here is
      bf16's, which FP8 products exceed).
    - Attention: the work the fused kernels did (the causal half of ``Q K^T`` and ``P V``, the
      backward recomputing the scores: :func:`jupyter_gpu.tutorials.flops.causal_attention_flops`)
      over their time. Model FLOPs count attention whole (``12 L d T`` per token); a kernel's
      rate that divided those would count work the kernel skipped.
    - The rest, and the step if every weight's product ran at the measured matmul rate.

    Args:
        profile: ``%%profile -o``'s result for the steps.
        shape: the model's shape.
        batch: sequences per step.
        steps: steps profiled.
        matmul_rate: the matmul rate measured here on this model's GEMMs (``None``: not
            measured; the lines then leave it out).
        checkpointing: activation checkpointing was on (the attention forward ran twice).
        fp8_peak: the data-sheet FP8 peak when the products ran in FP8
            (``Climb.fp8_peak``); ``None`` for products in the dtype the rate was measured in.
    """
    kinds = gpu_time_by_kind(profile.rows)
    wall = window_s(profile)
    if not kinds or not wall:
        return ["no GPU kernels in this profile: nothing to split"]
    tokens = batch * shape.seq_len * steps
    matmul_flops = 6 * shape.matmul_params() * tokens
    lines = []
    matmul_s = kinds.get("matrix products", 0.0)
    if matmul_s:
        rate = matmul_flops / matmul_s / 1e12
        if fp8_peak is not None:
            of_rate = (
                f" (in FP8: {rate / fp8_peak.dense_tflops:.0%} of the data-sheet dense FP8 peak, "
                f"{fp8_peak.dense_tflops:.0f} TFLOP/s)"
                if fp8_peak.dense_tflops
                else " (in FP8)"
            )
        elif matmul_rate is not None:
            of_rate = (
                f" ({matmul_rate.percent_of(rate):.0%} of {MATMUL_RATE_NAME} on this model's "
                f"GEMMs, {matmul_rate.tflops:.0f} TFLOP/s)"
            )
        else:
            of_rate = ""
        lines.append(
            f"matrix products of the weights: {rate:.0f} TFLOP/s{of_rate}, "
            f"{matmul_s / wall:.0%} of the profiled time"
        )
    attention_s = kinds.get("attention", 0.0)
    if attention_s:
        work = shape.n_layer * causal_attention_flops(
            batch * steps,
            shape.n_head,
            shape.seq_len,
            shape.head_dim,
            forward_passes=2 if checkpointing else 1,
        )
        lines.append(
            f"attention kernels: {work / attention_s / 1e12:.0f} TFLOP/s of the work they did "
            "(the causal half of Q K^T and P V, the backward recomputing the scores; model FLOPs "
            f"count attention whole instead), {attention_s / wall:.0%} of the time"
        )
    rest = sum(s for k, s in kinds.items() if k not in ("matrix products", "attention"))
    idle = profile.gpu_idle_fraction or 0.0
    lines.append(
        f"other kernels (elementwise, optimizer, copies): {rest / wall:.0%} of the time; "
        f"GPU idle: {idle:.0%}"
    )
    if matmul_s and fp8_peak is not None:
        measured_in = (
            f" ({MATMUL_RATE_NAME} is {'/'.join(matmul_rate.dtypes)}'s)" if matmul_rate else ""
        )
        lines.append(
            f"no FP8 matmul rate was measured here{measured_in}, so the step with every product "
            "at such a rate is not worked out"
        )
    elif matmul_s and matmul_rate is not None:
        ideal = wall - matmul_s + matmul_flops / (matmul_rate.tflops * 1e12)
        total = tokens * shape.train_flops_per_token()
        lines.append(
            f"with every weight's matrix product at {MATMUL_RATE_NAME} the profiled steps would "
            f"take {ideal / wall:.0%} of their time: {total / ideal / 1e12:.0f} model TFLOP/s "
            "under the profiler; the rest of the gap is the other lines"
        )
    return lines
