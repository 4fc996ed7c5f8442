"""MFU before and after, where it can be counted: model FLOPs over the data-sheet dense peak.

The peaks and the definition are ``jupyter_gpu.measure.peaks`` (``mfu(model_flops_per_s,
gpu_name, dtype)``: the GPU looked up by the name CUDA reports, the dtype the matrix products run
in); a GPU not in its table, or a MIG slice, gets no MFU and the table's reason. On a CPU there
is no data-sheet peak to divide by: no MFU, said so, rather than dividing by a measured rate.

Before and after a fix that changes the dtype the matmuls run in (fp32 to bf16 autocast), the two
MFUs divide by different peaks (the H200's fp32 peak is 67 TFLOP/s, its dense bf16 peak 989): a
step 2.5 times faster can go from 29 % to 5 %. Each figure keeps the definition (the peak of the
dtype its own matmuls run in: how far that configuration is from its own ceiling), so the line
names each figure's peak and adds the model TFLOP/s before and after, the one figure on one scale.
"""

from __future__ import annotations

from typing import Any

from jupyter_gpu.measure import peaks


def mfu(flops_per_s: float | None, gpu_name: str, dtype: str) -> Any:
    """The ``peaks.Mfu`` record, or a sentence saying why there is none."""
    if flops_per_s is None:
        return "no model FLOPs were counted"
    if not gpu_name:
        return "no MFU on a CPU: the data-sheet peaks are GPUs'"
    try:
        return peaks.mfu(flops_per_s, gpu_name, dtype)
    except ValueError as err:
        return f"no MFU: {err}"


def describe(value: Any, convention: str) -> str:
    """One sentence for a record or a reason."""
    if isinstance(value, str):
        return f"MFU: none ({value})."
    return str(value.describe(convention))


def percent(value: Any) -> str:
    """``57%`` or ``n/a``."""
    fraction = getattr(value, "fraction", None)
    return "n/a" if fraction is None else f"{fraction:.0%}"


def before_after(before: Any, after: Any) -> str | None:
    """``MFU 29 % of the fp32 peak (67 TFLOP/s) -> 5 % of the bf16 dense peak (989 TFLOP/s); ...``.

    Each figure is said with the peak it divides by; where the two peaks differ (the matmuls'
    dtype changed), the model TFLOP/s before and after follow, on one scale. ``None`` where
    either has no MFU (a CPU, a GPU not in the table, no FLOPs counted).
    """
    if getattr(before, "fraction", None) is None or getattr(after, "fraction", None) is None:
        return None
    rates = (
        f"model {before.model_flops_per_s / 1e12:.3g} -> {after.model_flops_per_s / 1e12:.3g} "
        "TFLOP/s"
    )
    if _peak_text(before) == _peak_text(after):
        return (
            f"MFU {before.fraction:.0%} -> {after.fraction:.0%} of the {_peak_text(before)} "
            f"({rates})"
        )
    return (
        f"MFU {before.fraction:.0%} of the {_peak_text(before)} -> {after.fraction:.0%} of the "
        f"{_peak_text(after)}: different peaks, since the matmuls' dtype changed; on one scale, "
        f"{rates}"
    )


def _peak_text(value: Any) -> str:
    """``bf16 dense peak (989 TFLOP/s)``: the data-sheet peak an MFU divides by."""
    peak = value.peak
    return f"{peak.dtype} dense peak ({peak.dense_tflops:g} TFLOP/s)"
