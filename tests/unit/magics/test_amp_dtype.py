"""Which autocast dtype ``%amp`` picks by itself on each kind of GPU."""

from __future__ import annotations

import pytest
import torch

from jupyter_gpu.magics.amp.autocast import resolve_dtype


def _gpu_with(native: bool) -> object:
    """``torch.cuda.is_bf16_supported`` of a GPU: an emulated bf16 says True by default."""

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        return native or including_emulation

    return is_bf16_supported


@pytest.mark.parametrize(("native", "expected"), [(True, "bf16"), (False, "fp16")])
def test_bf16_only_where_the_gpu_computes_it(
    monkeypatch: pytest.MonkeyPatch, native: bool, expected: str
) -> None:
    # A T4 (compute capability 7.5) emulates bf16 in software: fp16 is its fast format.
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", _gpu_with(native))
    assert resolve_dtype(None, "cuda") == expected
    assert resolve_dtype("bf16", "cuda") == "bf16", "a dtype asked for is kept"
    assert resolve_dtype(None, "cpu") == "bf16"
