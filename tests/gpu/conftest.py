"""Opt-in tests on a real NVIDIA GPU: every test here is marked ``gpu`` and skipped without one."""

from __future__ import annotations

import functools

import pytest


@functools.cache
def cuda_available() -> bool:
    """True when torch sees a CUDA device (imported here only, so CPU runs stay cheap)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CUDA (run on the GPU machine)")
    for item in items:
        if "tests/gpu/" in item.nodeid or item.get_closest_marker("gpu"):
            item.add_marker(pytest.mark.gpu)
            if not cuda_available():
                item.add_marker(skip)
