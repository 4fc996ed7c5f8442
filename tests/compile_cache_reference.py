"""Real torch.compile caches for the compile-cache tests, made by compiling with this torch.

The reference for what torch writes is never written by hand: ``build`` compiles one small
function with Inductor on CPU in two fresh processes at once, each with its own ``TMPDIR``:

- ``default``: no ``TORCHINDUCTOR_CACHE_DIR``, the Python wrapper: torch's default cache,
  ``<TMPDIR>/torchinductor_<user>``, with everything, ``precompiled_headers/`` included;
- ``configured``: ``TORCHINDUCTOR_CACHE_DIR`` set, ``torch._inductor.config.cpp_wrapper``: the
  configured cache, and beside it the default directory of that ``TMPDIR``, where torch 2.8+
  still puts ``precompiled_headers/`` (``configured_headers``).

CUDA is hidden so that the compiles are CPU compiles on any machine (the GPU check,
``tests/gpu/test_compile_cache_gpu.py``, compiles Triton kernels).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

COMPILE = """
import sys
import torch

if sys.argv[1] == "cpp_wrapper":
    torch._inductor.config.cpp_wrapper = True


def step(x, w):
    return torch.relu(x @ w + 1.0).sum(dim=0)


x = torch.randn(16, 16)
torch.compile(step)(x, x)
"""


@dataclass(frozen=True)
class Reference:
    """The caches one ``build`` made, and how long the two compiles took (wall, together)."""

    default: Path
    configured: Path
    configured_headers: Path | None  # None with torch < 2.8 (no precompiled headers)
    seconds: float


def _env(tmpdir: Path, cache: Path | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCH_LOGS"}
    }
    env.update(TMPDIR=str(tmpdir), CUDA_VISIBLE_DEVICES="")
    if cache is not None:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    return env


def _default_dir(tmpdir: Path) -> Path | None:
    found = list(tmpdir.glob("torchinductor_*"))  # torch's name for this user's default cache
    assert len(found) <= 1, found
    return found[0] if found else None


def build(root: Path) -> Reference:
    """Compile into fresh caches under ``root`` (both compiles at once); see the module."""
    tmp_default, tmp_configured, configured = root / "tmp-a", root / "tmp-b", root / "configured"
    for folder in (tmp_default, tmp_configured):
        folder.mkdir(parents=True)
    started = time.monotonic()
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", COMPILE, wrapper],
            env=_env(tmpdir, cache),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for wrapper, tmpdir, cache in (
            ("python", tmp_default, None),
            ("cpp_wrapper", tmp_configured, configured),
        )
    ]
    for run in runs:
        _, err = run.communicate(timeout=600)
        assert run.returncode == 0, f"the compile failed:\n{err[-3000:]}"
    default = _default_dir(tmp_default)
    assert default is not None, "torch wrote no default cache"
    return Reference(
        default=default,
        configured=configured,
        configured_headers=_default_dir(tmp_configured),
        seconds=time.monotonic() - started,
    )


def shared(root: Path) -> Reference:
    """``build`` once for every process of a test run that passes the same ``root``.

    Under pytest-xdist each worker is a process of its own with its own session fixtures: 15
    workers made 30 compiles at once on the GPU machine (188 s of set-up). The first process to
    take the lock builds; the others wait for it and read what it made (tests only read these
    caches, or copy them).
    """
    root.mkdir(parents=True, exist_ok=True)
    done = root / "reference.json"
    with (root / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            made = build(root / "made")
            fields = {k: str(v) if isinstance(v, Path) else v for k, v in vars(made).items()}
            done.write_text(json.dumps(fields))
    fields = json.loads(done.read_text())
    headers = fields["configured_headers"]
    return Reference(
        default=Path(fields["default"]),
        configured=Path(fields["configured"]),
        configured_headers=None if headers is None else Path(headers),
        seconds=float(fields["seconds"]),
    )
