"""MFU before and after, where it can be counted: model FLOPs over the data-sheet dense peak.

The peaks and the definition are ``jupyter_gpu.measure.peaks`` (``mfu(model_flops_per_s,
gpu_name, dtype)``: the GPU looked up by the name CUDA reports, the dtype the matrix products run
in); a GPU not in its table, or a MIG slice, gets no MFU and the table's reason. On a CPU there
is no data-sheet peak to divide by: no MFU, said so, rather than dividing by a measured rate.
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
