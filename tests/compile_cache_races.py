"""Helpers for the compile-cache tests that change a cache at the worst moment.

``SwapOnOpen`` stands in for ``os`` in a module of ``jupyter_gpu.compile_cache`` and changes the
tree just before that module opens one name: between the check and the deletion. ``small_cache``
builds a cache of torch's shapes (``shapes.py``; the shapes themselves are checked against real
compiles in ``test_torch_written_caches.py``) in milliseconds, for tests that need no compile.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

KEY = "c" + "a" * 51  # a code key as torch makes them: "c" + 51 base32 characters
OTHER_KEY = "c" + "b" * 51


class SwapOnOpen:
    """``os`` as a module sees it, except that opening ``name`` first calls ``swap`` (once)."""

    def __init__(self, name: str, swap: Callable[[], None]) -> None:
        self.name, self.swap, self.swapped = name, swap, False

    def __getattr__(self, attr: str) -> Any:
        return getattr(os, attr)

    def open(self, path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if path == self.name and not self.swapped:
            self.swapped = True
            self.swap()
        return os.open(path, flags, mode, dir_fd=dir_fd)


def small_cache(root: Path, name: str = "torchinductor_me") -> Path:
    """An Inductor cache at ``root/name``: two code folders, a lock folder.

    ``aa/`` holds ``KEY.py`` (1,000 bytes) and ``KEY.so`` (500), ``bb/`` holds ``OTHER_KEY.py``
    (2,000), ``locks/`` holds ``KEY.lock`` (empty).
    """
    cache = root / name
    for folder in ("aa", "bb", "locks"):
        (cache / folder).mkdir(parents=True)
    (cache / "aa" / f"{KEY}.py").write_bytes(b"p" * 1000)
    (cache / "aa" / f"{KEY}.so").write_bytes(b"s" * 500)
    (cache / "bb" / f"{OTHER_KEY}.py").write_bytes(b"q" * 2000)
    (cache / "locks" / f"{KEY}.lock").write_bytes(b"")
    return cache
