"""Precision fixes: TF32 for float32 matmuls and convolutions, and 16-bit autocast.

- **TF32** (CUDA, Ampere and later): float32 matmuls and convolutions on the tensor cores with a
  10-bit mantissa (PyTorch's CUDA semantics, "TensorFloat-32 (TF32) on Ampere (and later)
  devices"). Tried where float32 matmuls or convolutions hold a measured share of the step.
- **Autocast** to bf16 where the device computes it (``resolve_dtype``: a CUDA GPU with bf16
  tensor cores; a CPU with AVX512-BF16 or AMX), else fp16 on CUDA, which needs the loss scaled
  (``GradScaler``). Opened per step, as a training loop does (``%amp``'s ``step_in_mode``).
  Tried where matmuls or convolutions hold a measured share and do not run in 16 bits already.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from jupyter_gpu.magics.amp.autocast import resolve_dtype, step_in_mode
from jupyter_gpu.magics.output.render import fmt_pct
from jupyter_gpu.magics.probes.precision import Tf32Settings, set_tf32

from .evidence import SMALL_SHARE
from .fixes import Fix

if TYPE_CHECKING:
    from .evidence import Evidence
    from .fixes import TuneSession


class Tf32(Fix):
    """TF32 for float32 matmuls and cuDNN convolutions (``%amp tf32 on``)."""

    name = "TF32 matmuls and convolutions"
    family = "precision"
    key = "tf32"
    needs_gpu = True
    order = 20

    def why_not(self, ev: Evidence) -> str | None:
        if not ev.cuda:
            return "TF32 is a format of NVIDIA's tensor cores: it changes CUDA matmuls only"
        if not ev.tf32_hardware:
            return "this GPU has no TF32 tensor cores (they start with Ampere, compute 8.0)"
        if all(ev.tf32):
            return "TF32 is on already for matmuls and convolutions"
        share = ev.matmul_share(dtype="float32")
        if share < SMALL_SHARE:
            return (
                f"float32 matmuls and convolutions took {fmt_pct(share)} of a profiled step's "
                "GPU time: TF32 has little to speed up"
            )
        return None

    @contextlib.contextmanager
    def applied(self, s: TuneSession) -> Iterator[None]:
        saved = Tf32Settings.read()
        set_tf32(True)
        try:
            yield
        finally:
            saved.apply()

    def code(self, s: TuneSession) -> list[str]:
        return ["%amp tf32 on  # TF32 for float32 matmuls and convolutions"]

    def apply(self, s: TuneSession) -> str:
        set_tf32(True)
        return "TF32 on for float32 matmuls and convolutions (as %amp tf32 on)"


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bf16 in hardware (AVX512-BF16 or AMX tiles), as torch sees it."""
    import torch  # loaded already: the magic imported it

    cpu = getattr(torch, "cpu", None)
    for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        check = getattr(cpu, probe, None)
        if callable(check) and check():
            return True
    return False


class Autocast(Fix):
    """Autocast to bf16 (or fp16 with a GradScaler where bf16 is not computed)."""

    family = "precision"
    key = "autocast"
    order = 25

    def __init__(self, dtype: str, device: str) -> None:
        self.dtype = dtype
        self.device = device
        self.name = f"{dtype} autocast"
        self.needs_gpu = dtype == "fp16"

    @classmethod
    def for_device(cls, device: str) -> Autocast:
        """bf16 where the device computes it, else fp16 (CUDA); bf16 on a CPU."""
        return cls(resolve_dtype(None, device) if device == "cuda" else "bf16", device)

    def why_not(self, ev: Evidence) -> str | None:
        if ev.autocast_on:
            return f"autocast is on already ({ev.autocast_dtype or 'a 16-bit dtype'})"
        low = ev.matmul_dtypes() & {"bfloat16", "float16"}
        if low:
            return f"the step's matmuls run in {', '.join(sorted(low))} already"
        if not ev.cuda and not cpu_has_bf16():
            return (
                "this CPU has no bf16 instructions (AVX512-BF16 or AMX): CPU autocast would "
                "emulate bf16, slower than float32"
            )
        share = ev.matmul_share()
        if share < SMALL_SHARE:
            return (
                f"matmuls and convolutions took {fmt_pct(share)} of a profiled step: 16-bit "
                "math has little to speed up"
            )
        return None

    def wrap(self, run: Callable[[], Any]) -> Callable[[], Any]:
        return step_in_mode(run, self.dtype, self.device)

    def code(self, s: TuneSession) -> list[str]:
        line = f"%amp on --dtype {self.dtype}"
        if s.target.device != "cuda":
            line += " --device cpu"
        lines = [f"{line}  # autocast from this line on (with torch.autocast in a script)"]
        if self.dtype == "fp16":
            lines.append(
                "# fp16 scales the loss: scaler.scale(loss).backward(); scaler.step(opt); "
                "scaler.update()"
            )
        return lines

    def apply(self, s: TuneSession) -> str:
        device = "" if s.target.device == "cuda" else " --device cpu"
        s.shell.run_line_magic("amp", f"on --dtype {self.dtype}{device} -q")
        scaler = " (a GradScaler is in the notebook as scaler: the step must use it)"
        return f"%amp on --dtype {self.dtype}{device}" + (scaler if self.dtype == "fp16" else "")
