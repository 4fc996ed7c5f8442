"""Notebook 02's FP8 section says why it skips, and converts only layers FP8 can run."""

from __future__ import annotations

import pytest
import torch

from jupyter_gpu.tutorials import fp8


def test_without_a_gpu_the_section_says_why_it_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    reason = fp8.skip_reason()
    assert reason is not None
    assert reason.startswith("no GPU")


def test_an_older_gpu_or_an_emulated_t4_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda: (8, 0))
    assert "compute capability 8.0" in (fp8.skip_reason() or "")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda: (9, 0))
    assert "emulates a T4" in (fp8.skip_reason("a T4") or "")


def test_the_mlp_trains_and_its_layers_convert() -> None:
    model = fp8.mlp(32, 64, blocks=2)
    out = model(torch.randn(4, 32))
    assert out.shape == (4, 32)
    pytest.importorskip("torchao")  # optional here: the [tutorials] extra installs it
    fp8.to_float8(model)
    names = {type(m).__name__ for m in model.modules()}
    assert "Float8Linear" in names
