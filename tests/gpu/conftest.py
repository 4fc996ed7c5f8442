"""Opt-in tests on a real NVIDIA GPU: every test here is marked ``gpu`` and skipped without one."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.outputs import write_json
from tests.gpu.magic_shell import Shell, magic_shell

# Each test file's cells and figures so far, by the name its outputs take (see _out_name).
_LOGS: dict[str, list[str]] = {}
_FIGURES: dict[str, dict[str, Any]] = {}


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


def _out_name(request: pytest.FixtureRequest) -> str:
    """The name a test file's outputs take: ``test_tune_gpu.py`` writes ``tune_gpu.log``."""
    return request.path.stem.removeprefix("test_")


@pytest.fixture
def shell(request: pytest.FixtureRequest) -> Iterator[Shell]:
    """A fresh shell with the magics loaded (magic_shell.py).

    Every cell of the test file so far goes to ``$JUPYTER_GPU_OUT/<name>.log`` when that is set.
    """
    name = _out_name(request)
    yield from magic_shell(_LOGS.setdefault(name, []), f"{name}.log")


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """The figures the test file measured, one dict for the whole file.

    Written to ``$JUPYTER_GPU_OUT/<name>.json`` (or ``$OUT``) after each test that takes them,
    passed or failed, so a session cut short by its time limit keeps the figures so far.
    """
    name = _out_name(request)
    kept = _FIGURES.setdefault(name, {})
    yield kept
    write_json(f"{name}.json", kept, indent=1)
