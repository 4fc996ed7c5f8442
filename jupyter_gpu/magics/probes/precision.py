"""TF32 and autocast as torch has them set now: read them, set TF32, put it back exactly.

Shared by the magics (``%amp``, ``%%profile``'s hints, ``%compile --bench``'s causes) and the
tutorials. torch 2.9 and later have per-backend ``fp32_precision`` settings
(``torch.backends.cuda.matmul``, ``torch.backends.cudnn.conv`` and ``.rnn``, ``"ieee"``, ``"tf32"``
or ``"none"``, which inherits from the parent) beside the older global ones
(``torch.get_float32_matmul_precision()``, ``allow_tf32``). Setting only the new ones leaves the
two views disagreeing, and then torch's own readers of the old ones raise "PyTorch is checking the
matmul precision without a specific backend name": Inductor's max-autotune does, so notebook 07
failed on the H200 (GPU run 21 of 2026-12-02) after ``%amp tf32 on``. So the matmul setting goes
through ``torch.set_float32_matmul_precision`` (which sets both views) and the per-backend values
are then put exactly where they belong; likewise cuDNN's ``allow_tf32`` before its convolutions'
and RNNs' values (one value for both: the old reader raises when they differ). Older torch gets
the ``allow_tf32`` flags.
"""

from __future__ import annotations

from dataclasses import dataclass

from jupyter_gpu.magics.shell.lazy_torch import torch_module


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

    With the new API the values are the ``fp32_precision`` strings (``legacy_matmul`` is
    ``torch.get_float32_matmul_precision()``, None where the settings already disagreed so that
    torch cannot say); with the old one, ``matmul`` and ``conv`` are the ``allow_tf32`` booleans
    and the other fields are None.
    """

    matmul: str | bool
    conv: str | bool
    rnn: str | None = None
    cpu_matmul: str | None = None  # torch.backends.mkldnn.matmul, moved by the legacy setter
    legacy_matmul: str | None = None
    legacy_cudnn: bool | None = None  # torch.backends.cudnn.allow_tf32, None where it raises

    @classmethod
    def read(cls) -> Tf32Settings:
        torch = torch_module()
        if not has_fp32_precision_api():
            return cls(
                bool(torch.backends.cuda.matmul.allow_tf32), bool(torch.backends.cudnn.allow_tf32)
            )
        try:
            legacy: str | None = torch.get_float32_matmul_precision()
        except RuntimeError:  # the two views disagree (someone set only the new ones)
            legacy = None
        try:
            legacy_cudnn: bool | None = bool(torch.backends.cudnn.allow_tf32)
        except RuntimeError:
            legacy_cudnn = None
        return cls(
            torch.backends.cuda.matmul.fp32_precision,
            torch.backends.cudnn.conv.fp32_precision,
            torch.backends.cudnn.rnn.fp32_precision,
            torch.backends.mkldnn.matmul.fp32_precision,
            legacy,
            legacy_cudnn,
        )

    def apply(self) -> None:
        """Set torch's flags to these values (only those that differ)."""
        torch = torch_module()
        if not has_fp32_precision_api():
            now = Tf32Settings.read()
            if now.matmul != self.matmul:
                torch.backends.cuda.matmul.allow_tf32 = bool(self.matmul)
            if now.conv != self.conv:
                torch.backends.cudnn.allow_tf32 = bool(self.conv)
            return
        # The old settings first: setting them also moves the per-backend values set just below.
        before = Tf32Settings.read()
        if self.legacy_matmul is not None and self.legacy_matmul != before.legacy_matmul:
            torch.set_float32_matmul_precision(self.legacy_matmul)
        if self.legacy_cudnn is not None and self.legacy_cudnn != before.legacy_cudnn:
            torch.backends.cudnn.allow_tf32 = self.legacy_cudnn
        now = Tf32Settings.read()
        backends = torch.backends
        targets = (
            (backends.cuda.matmul, now.matmul, self.matmul),
            (backends.mkldnn.matmul, now.cpu_matmul, self.cpu_matmul),
            (backends.cudnn.conv, now.conv, self.conv),
            (backends.cudnn.rnn, now.rnn, self.rnn),
        )
        for setting, current, wanted in targets:
            if wanted is not None and current != wanted:
                setting.fp32_precision = wanted


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
    """Allow (or forbid) TF32 for float32 matmuls and cuDNN's convolutions and RNNs on CUDA.

    With the new API both views of the matmul setting agree afterwards, and CPU matmuls keep
    what they had.
    """
    if not has_fp32_precision_api():
        Tf32Settings(enabled, enabled).apply()
        return
    value = "tf32" if enabled else "ieee"
    keep_cpu = Tf32Settings.read().cpu_matmul
    legacy = "high" if enabled else "highest"
    Tf32Settings(value, value, value, keep_cpu, legacy, enabled).apply()


def tf32_supported() -> bool:
    """True when the current CUDA device has TF32 tensor cores (Ampere, compute 8.0, or later)."""
    torch = torch_module()
    if not torch.cuda.is_available():
        return False
    major, _ = torch.cuda.get_device_capability()
    return bool(major >= 8)
