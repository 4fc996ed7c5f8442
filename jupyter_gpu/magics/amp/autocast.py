"""``%amp``'s autocast: its dtype and device, its contexts, and the modes ``%amp compare`` runs.

The contexts that span a cell or every cell cache no weight casts (``make_autocast``); ``%amp
compare`` opens one per step, as a training loop does (``step_in_mode``). TF32 is read and set
through ``probes/precision.py``.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from IPython.core.error import UsageError

from jupyter_gpu.magics.probes.precision import Tf32Settings, set_tf32
from jupyter_gpu.magics.shell.lazy_torch import torch_module

DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16"}


def resolve_dtype(dtype: str | None, device: str) -> str:
    """The autocast dtype to use: the one asked for, else bf16 where the GPU computes it, else fp16.

    ``torch.cuda.is_bf16_supported()`` alone also says True where bf16 is only emulated in
    software (a T4, compute capability 7.5), where fp16 is the fast choice.
    """
    if dtype is not None:
        return dtype
    torch_module()  # the UsageError that says how to install torch, where it is missing
    import torch

    if device == "cuda" and not torch.cuda.is_bf16_supported(including_emulation=False):
        return "fp16"
    return "bf16"


def resolve_device(device: str | None) -> str:
    """The autocast device: the one asked for (checked), else cuda when present, else cpu.

    Raises:
        UsageError: cuda asked for on a machine where torch sees no GPU.
    """
    torch_module()  # the UsageError that says how to install torch, where it is missing
    import torch

    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError(
            "--device cuda: torch sees no CUDA GPU in this kernel; use --device cpu (CPU "
            "autocast works) or run on a machine with a GPU."
        )
    return device


def make_autocast(device: str, dtype: str) -> Any:
    """A ``torch.autocast`` context for ``device``/``dtype`` that caches no weights, checked.

    For contexts that may span several training steps (a ``%%amp`` cell, every cell under
    ``%amp on``). With torch's default ``cache_enabled=True``, autocast keeps the
    low-precision copy of each weight (a leaf tensor that requires grad) until its outermost
    context closes; ``optimizer.step()`` updates the float32 weights in place, so every later
    forward in the same context would use the stale copies and training would stall. A
    ``torch.autocast`` of the user's own opened inside this one inherits ``cache_enabled=False``.

    Raises:
        UsageError: this device cannot autocast to this dtype (e.g. bf16 on a pre-Ampere GPU).
    """
    torch_module()  # the UsageError that says how to install torch, where it is missing
    import torch

    torch_dtype = getattr(torch, DTYPE_NAMES[dtype])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ctx = torch.autocast(device_type=device, dtype=torch_dtype, cache_enabled=False)
        except RuntimeError as exc:
            raise UsageError(
                f"{device} cannot autocast to {dtype} here ({exc}); try --dtype fp16."
            ) from None
    if not ctx._enabled:
        detail = "; ".join(str(w.message).splitlines()[0] for w in caught)
        raise UsageError(f"{device} autocast does not support {dtype} in this torch ({detail}).")
    return ctx


def autocast_nesting() -> int:
    """How many ``torch.autocast`` contexts are open in this thread now (0: none).

    torch counts them (``autocast_increment_nesting`` in ``torch.autocast.__enter__``, the
    decrement in ``__exit__``, which drops the cast cache at 0) and offers no reader, so this
    counts one up and back down: neither step clears the cache or changes what autocast does.
    """
    torch_module()  # the UsageError that says how to install torch, where it is missing
    import torch

    level = int(torch.autocast_increment_nesting())
    torch.autocast_decrement_nesting()
    return level - 1


@contextlib.contextmanager
def precision_mode(mode: str, device: str) -> Iterator[None]:
    """TF32 on for tf32, off otherwise; autocast off for fp32/tf32 (see ``step_in_mode``)."""
    torch_module()  # the UsageError that says how to install torch, where it is missing
    import torch

    saved = Tf32Settings.read()
    set_tf32(mode == "tf32")
    try:
        if mode in ("bf16", "fp16"):
            yield  # the autocast is per step: step_in_mode
        else:
            # Off explicitly: under %amp on, this cell itself runs with autocast on.
            with torch.autocast(device_type=device, enabled=False):
                yield
    finally:
        saved.apply()


def step_in_mode(step: Callable[[], Any], mode: str, device: str) -> Callable[[], Any]:
    """``step`` as ``mode`` runs it: bf16/fp16 open a fresh autocast around every call.

    As a training loop does (``with torch.autocast(...)`` per step): the weight casts are
    cached within one step and redone in the next, after ``optimizer.step()`` changed the
    weights, so each step sees its fresh weights and the time includes the casts. One context
    around all the runs would reuse the first step's casts. ``cache_enabled`` is inherited:
    under ``%amp on`` the cell's autocast caches nothing, and neither does this one.
    """
    if mode not in ("bf16", "fp16"):
        return step
    torch_module()  # the UsageError that says how to install torch, where it is missing
    import torch

    dtype = getattr(torch, DTYPE_NAMES[mode])

    def run() -> Any:
        with torch.autocast(device_type=device, dtype=dtype):
            return step()

    return run
