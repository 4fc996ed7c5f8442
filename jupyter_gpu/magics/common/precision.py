"""TF32 and autocast as torch has them set now: read them, set TF32, put it back exactly.

Shared by the magics (``%amp``, ``%%profile``'s hints, ``%compile --bench``'s causes) and the
tutorials. torch 2.9 and later have ``torch.backends.cuda.matmul.fp32_precision`` and
``torch.backends.cudnn.conv.fp32_precision`` (``"ieee"``, ``"tf32"`` or ``"none"``, which
inherits from the parent setting); they raise if the older ``allow_tf32`` flags were mixed in,
so where the new API exists only the new API is used. Older torch gets the ``allow_tf32`` flags.
"""

from __future__ import annotations

from dataclasses import dataclass

from .lazy_torch import torch_module


def autocast_enabled(device: str) -> bool:
    """Whether autocast is on for ``device`` in this thread right now."""
    torch = torch_module()
    return bool(torch.is_autocast_enabled(device))


def has_fp32_precision_api() -> bool:
    """True where torch has the ``fp32_precision`` settings (torch 2.9 and later)."""
    torch = torch_module()
    return hasattr(torch.backends.cuda.matmul, "fp32_precision")


@dataclass(frozen=True)
class Tf32Settings:
    """The raw TF32-related settings, to put back exactly as they were.

    With the new API the values are the ``fp32_precision`` strings; with the old one,
    the ``allow_tf32`` booleans.
    """

    matmul: str | bool
    conv: str | bool

    @classmethod
    def read(cls) -> Tf32Settings:
        torch = torch_module()
        if has_fp32_precision_api():
            return cls(
                torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision
            )
        return cls(
            bool(torch.backends.cuda.matmul.allow_tf32), bool(torch.backends.cudnn.allow_tf32)
        )

    def apply(self) -> None:
        """Set torch's flags to these values (only those that differ, to mix no APIs)."""
        torch = torch_module()
        now = Tf32Settings.read()
        if has_fp32_precision_api():
            if now.matmul != self.matmul:
                torch.backends.cuda.matmul.fp32_precision = self.matmul
            if now.conv != self.conv:
                torch.backends.cudnn.conv.fp32_precision = self.conv
            return
        if now.matmul != self.matmul:
            torch.backends.cuda.matmul.allow_tf32 = bool(self.matmul)
        if now.conv != self.conv:
            torch.backends.cudnn.allow_tf32 = bool(self.conv)


def _effective(value: str, *parents: str) -> bool:
    for setting in (value, *parents):
        if setting != "none":
            return setting == "tf32"
    return False


def tf32_enabled() -> tuple[bool, bool]:
    """Whether float32 matmuls and convolutions on CUDA may use TF32 now: (matmul, conv)."""
    torch = torch_module()
    if has_fp32_precision_api():
        # The parents ("none" defers to them) may be missing in some versions: then "none".
        root = getattr(torch.backends, "fp32_precision", "none")
        cudnn = getattr(torch.backends.cudnn, "fp32_precision", "none")
        return (
            _effective(torch.backends.cuda.matmul.fp32_precision, root),
            _effective(torch.backends.cudnn.conv.fp32_precision, cudnn, root),
        )
    return bool(torch.backends.cuda.matmul.allow_tf32), bool(torch.backends.cudnn.allow_tf32)


def set_tf32(enabled: bool) -> None:
    """Allow (or forbid) TF32 for float32 matmuls and convolutions on CUDA."""
    if has_fp32_precision_api():
        value = "tf32" if enabled else "ieee"
        Tf32Settings(value, value).apply()
    else:
        Tf32Settings(enabled, enabled).apply()


def tf32_supported() -> bool:
    """True when the current CUDA device has TF32 tensor cores (Ampere, compute 8.0, or later)."""
    torch = torch_module()
    if not torch.cuda.is_available():
        return False
    major, _ = torch.cuda.get_device_capability()
    return bool(major >= 8)
