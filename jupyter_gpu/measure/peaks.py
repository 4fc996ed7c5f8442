"""NVIDIA's data-sheet peak FLOP rates per GPU model and dtype, dense; MFU by its definition.

MFU (model FLOPs utilisation, PaLM: Chowdhery et al. 2022, appendix B) is the model FLOPs a step
does per second over the hardware's peak FLOP rate. The peak is the one NVIDIA prints for the GPU
model and the dtype the matrix products run in, **dense**: data sheets print most tensor-core
figures "with sparsity" (2:4 structured sparsity, which a dense training step never uses), and the
dense rate is half of that. Where a document prints both ("156 | 312*"), the table keeps both and
uses the dense one; where it prints only the sparse one, the dense rate is that halved. Where the
document prints only a dense rate (T4: Turing has no sparsity; FP32 on the CUDA cores) it is used
as it is.

Which figure is "bf16" or "fp16": a torch 16-bit matmul accumulates in FP32 (cuBLAS's
``CUBLAS_COMPUTE_32F``), so the table holds the rates "with FP32 accumulate". Data-center GPUs run
both accumulations at one rate; GeForce cards run FP32 accumulate at half the FP16-accumulate rate
(Ada and RTX Blackwell whitepapers), and the table holds the slower, FP32-accumulate figure. FP8,
where the GPU has it, is also the FP32-accumulate figure (``torch._scaled_mm`` accumulates in
FP32 unless asked for fast accumulation). ``fp32`` is the non-tensor FP32 rate (a strict fp32
matmul); ``tf32`` the TF32 tensor-core rate (fp32 tensors with TF32 allowed).

Looking a GPU up: by the name NVML and CUDA report (``nvmlDeviceGetName``,
``torch.cuda.get_device_name``), matched exactly (case and spacing aside), so that a laptop part
("... RTX 4090 Laptop GPU") or a name nobody checked never borrows another board's peak. A MIG
slice ("NVIDIA H100 80GB HBM3 MIG 1g.10gb") gets no peak: it has a share of the GPU's SMs and
memory that the data sheet does not print. Read the name of the CUDA device the process runs on
(``torch.cuda.get_device_name``): on a MIG slice it names the slice, where NVML's parent-GPU
handle names the whole GPU.

Nothing here imports torch or NVML: the caller passes the name.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .datasheets import DTYPES, TABLE, GpuPeaks, PrintedPeak, dtype_key

__all__ = [
    "DTYPES",
    "TABLE",
    "GpuPeaks",
    "Mfu",
    "PeakLookup",
    "PrintedPeak",
    "dtype_key",
    "find_gpu",
    "markdown_table",
    "mfu",
    "peak_for",
]

# "MIG 1g.10gb", "MIG 3g.40gb", "MIG 1g.10gb+me": a slice's profile in the device's name.
_MIG = re.compile(r"\bMIG\b(?:\s+(\d+g\.\d+gb\S*))?", re.IGNORECASE)


def _normal(name: str) -> str:
    return " ".join(name.split()).casefold()


_BY_NAME = {_normal(n): gpu for gpu in TABLE for n in gpu.nvml_names}


@dataclass(frozen=True)
class PeakLookup:
    """The data-sheet dense peak of one GPU and dtype, or why there is none.

    Attributes:
        gpu_name: the name looked up (as NVML or CUDA reported it).
        dtype: the table's dtype name.
        gpu: the table's record, or ``None`` for a GPU not in the table (or a MIG slice).
        dense_tflops: the dense peak, or ``None``; ``why_none`` then says why.
        why_none: a sentence, empty when there is a peak.
    """

    gpu_name: str
    dtype: str
    gpu: GpuPeaks | None
    dense_tflops: float | None
    why_none: str = ""

    def describe(self) -> str:
        """``NVIDIA H200 (H200 SXM): 989.5 TFLOP/s dense bf16, from the ...``, or why not."""
        if self.dense_tflops is None or self.gpu is None:
            return self.why_none
        note = f"; {self.gpu.note}" if self.gpu.note else ""
        return (
            f"{self.gpu_name} ({self.gpu.model}): {self.dense_tflops:g} TFLOP/s dense "
            f"{self.dtype}, from the {self.gpu.source.title}{note}"
        )


def find_gpu(gpu_name: str) -> tuple[GpuPeaks | None, str]:
    """The table's record for an NVML/CUDA device name, or ``None`` and a sentence saying why."""
    mig = _MIG.search(gpu_name)
    if mig is not None:
        profile = mig.group(1) or "a MIG profile"
        return None, (
            f"{gpu_name!r} is a MIG slice ({profile}): it has a share of the GPU's SMs and memory, "
            "and the data sheet prints the whole GPU's peak, so no MFU is shown"
        )
    gpu = _BY_NAME.get(_normal(gpu_name))
    if gpu is None:
        return None, (
            f"{gpu_name!r} is not in the data-sheet table (jupyter_gpu/measure/datasheets.py), "
            "so no MFU is shown; the matmul rate measured here is the figure to compare with"
        )
    return gpu, ""


def peak_for(gpu_name: str, dtype: object) -> PeakLookup:
    """The data-sheet dense peak for a device name and a dtype (``"bf16"``, ``torch.bfloat16``).

    Raises:
        ValueError: a dtype the table has no column for (see :func:`dtype_key`).
    """
    key = dtype_key(dtype)
    gpu, why = find_gpu(gpu_name)
    if gpu is None:
        return PeakLookup(gpu_name, key, None, None, why)
    dense = gpu.dense_tflops(key)
    if dense is None:
        return PeakLookup(
            gpu_name,
            key,
            gpu,
            None,
            f"the {gpu.source.title} prints no {key} rate for the {gpu.model}, so no MFU is shown",
        )
    return PeakLookup(gpu_name, key, gpu, dense)


@dataclass(frozen=True)
class Mfu:
    """Model FLOPs utilisation: model FLOP/s over the data-sheet dense peak, or why there is none.

    Attributes:
        fraction: model FLOP/s over the peak (0.57 for 57 %), or ``None``.
        model_flops_per_s: the model FLOPs per second it was computed from.
        peak: the lookup (its ``why_none`` says why ``fraction`` is ``None``).
    """

    fraction: float | None
    model_flops_per_s: float
    peak: PeakLookup

    @property
    def why_none(self) -> str:
        return self.peak.why_none

    def percent_text(self) -> str:
        """``57%``, or ``n/a`` (for a table cell; the caption says the convention)."""
        return "n/a" if self.fraction is None else f"{self.fraction:.0%}"

    def describe(self, flops_convention: str) -> str:
        """A sentence with the MFU, the peak, its source and the model-FLOPs convention.

        ``flops_convention`` says how the model FLOPs were counted (e.g. ``"6 N + 12 L d T per
        token, causal mask not subtracted"``): an MFU means nothing without it.
        """
        if self.fraction is None or self.peak.gpu is None:
            return f"MFU: none. {self.why_none[:1].upper()}{self.why_none[1:]}."
        gpu = self.peak.gpu
        return (
            f"MFU {self.fraction:.0%}: {self.model_flops_per_s / 1e12:.1f} model TFLOP/s over the "
            f"{gpu.model}'s data-sheet dense {self.peak.dtype} peak of "
            f"{self.peak.dense_tflops:g} TFLOP/s ({gpu.source.title}); model FLOPs: "
            f"{flops_convention}"
        )


def mfu(model_flops_per_s: float, gpu_name: str, dtype: object) -> Mfu:
    """Model FLOPs utilisation of a step on ``gpu_name`` whose matrix products run in ``dtype``.

    Args:
        model_flops_per_s: model FLOPs per second (FLOP/s, not TFLOP/s).
        gpu_name: the device's name as NVML or ``torch.cuda.get_device_name`` reports it.
        dtype: the dtype the matrix products run in (``"bf16"`` under bf16 autocast).

    Returns:
        an :class:`Mfu` whose ``fraction`` is ``None`` (with ``why_none``) for a GPU or dtype not
        in the table, or a MIG slice.

    Raises:
        ValueError: a negative or non-finite rate, or a dtype the table has no column for.
    """
    if not math.isfinite(model_flops_per_s) or model_flops_per_s < 0:
        raise ValueError(f"model FLOP/s must be a finite rate >= 0, not {model_flops_per_s}")
    peak = peak_for(gpu_name, dtype)
    if peak.dense_tflops is None:
        return Mfu(None, model_flops_per_s, peak)
    return Mfu(model_flops_per_s / (peak.dense_tflops * 1e12), model_flops_per_s, peak)


def _cell(printed: PrintedPeak | None) -> str:
    if printed is None:
        return "—"
    dense, sparse = printed.printed_dense_tflops, printed.printed_sparse_tflops
    if dense is None:
        return f"{printed.dense_tflops:g} = {sparse:g}\\*/2"
    if sparse is not None:
        return f"{dense:g} \\| {sparse:g}\\*"
    return f"{dense:g}"


def markdown_table() -> str:
    """The table as docs/measuring.md shows it (a test keeps the two the same).

    A cell is the dense TFLOP/s; ``x = y*/2`` where the document prints only ``y`` with
    sparsity, ``x | y*`` where it prints both, ``—`` where it prints no such rate.
    """
    lines = [
        "| GPU | name NVML and CUDA report | " + " | ".join(DTYPES) + " | source |",
        "|---|---|" + "---|" * len(DTYPES) + "---|",
    ]
    for gpu in TABLE:
        names = "<br>".join(f"`{n}`" for n in gpu.nvml_names)
        cells = " | ".join(_cell(gpu.printed(d)) for d in DTYPES)
        lines.append(
            f"| {gpu.model} | {names} | {cells} | [{gpu.source.title}]({gpu.source.url}) |"
        )
    return "\n".join(lines)
