r"""The torch.compile caches on disk: where torch puts them, and how big they are.

The locations are resolved the way torch and Triton resolve them, without importing either:

- Inductor: ``$TORCHINDUCTOR_CACHE_DIR`` (made absolute), else
  ``<tempdir>/torchinductor_<user>`` where the user name has ``\\/:*?"<>|`` replaced by ``_``
  (``uid_<uid>`` if there is no user name); as ``torch/_inductor/runtime/cache_dir_utils.py``.
- Triton: ``$TRITON_CACHE_DIR``, else ``$TRITON_HOME/.triton/cache`` with ``$TRITON_HOME``
  defaulting to the home directory; as ``triton/knobs.py``. (Kernels that Inductor compiles with
  Triton go under the Inductor directory unless ``$TRITON_CACHE_DIR`` is set.)

A scan walks the trees with ``os.scandir`` and never follows symlinks; it is meant to run in a
background thread (a 100,000-file tree takes about a second) and stops early when asked to.
"""

from __future__ import annotations

import getpass
import os
import re
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from jupyter_gpu.sampling.records import CacheDirSample, CompileCacheSample

CacheKind = Literal["inductor", "triton"]

_UNSAFE_IN_USERNAME = re.compile(r'[\\/:*?"<>|]')


def inductor_cache_dir(environ: Mapping[str, str] | None = None) -> str:
    """Where torch.compile (Inductor) keeps its cache, as torch resolves it."""
    env = os.environ if environ is None else environ
    configured = env.get("TORCHINDUCTOR_CACHE_DIR")
    if configured is not None:
        # abspath, as torch: it normalises ".." without resolving symlinks (Path.resolve would).
        return os.path.abspath(configured)  # noqa: PTH100 (abspath on purpose: see above)
    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):  # no passwd entry (e.g. a container uid)
        getuid = getattr(os, "getuid", None)
        user = f"uid_{getuid()}" if callable(getuid) else "unknown_user"
    sanitized = _UNSAFE_IN_USERNAME.sub("_", user)
    return str(Path(tempfile.gettempdir()) / f"torchinductor_{sanitized}")


def triton_cache_dir(environ: Mapping[str, str] | None = None) -> str:
    """Where Triton keeps compiled kernels when run by itself, as Triton resolves it."""
    env = os.environ if environ is None else environ
    configured = env.get("TRITON_CACHE_DIR")
    if configured is not None:
        return configured
    home = env.get("TRITON_HOME", str(Path("~").expanduser()))
    return str(Path(home) / ".triton" / "cache")


def cache_dirs(environ: Mapping[str, str] | None = None) -> tuple[tuple[CacheKind, str], ...]:
    """The cache directories to watch, in a fixed order (Inductor, then Triton)."""
    return (("inductor", inductor_cache_dir(environ)), ("triton", triton_cache_dir(environ)))


def scan_dir(
    path: str, stop: threading.Event | None = None, yield_every: int = 2000
) -> tuple[bool, int, int]:
    """Walk one tree: ``(exists, size_bytes, file_count)`` of its regular files.

    A missing directory is ``(False, 0, 0)``; unreadable subdirectories are skipped. Every
    ``yield_every`` entries the walk gives up the GIL for a moment and checks ``stop``.
    """
    if not Path(path).is_dir():
        return False, 0, 0
    size = count = seen = 0
    stack = [path]
    while stack:
        top = stack.pop()
        try:
            with os.scandir(top) as entries:
                for entry in entries:
                    seen += 1
                    if seen % yield_every == 0:
                        if stop is not None and stop.is_set():
                            return True, size, count
                        time.sleep(0)  # let the sampler's tick and the server run
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            size += entry.stat(follow_symlinks=False).st_size
                            count += 1
                    except OSError:  # vanished while we walked (a compile was cleaning up)
                        continue
        except OSError:
            continue
    return True, size, count


def _inside(path: str, other: str) -> bool:
    """Whether ``path`` is ``other`` or lies under it."""
    path, other = os.path.normpath(path), os.path.normpath(other)
    return path == other or path.startswith(other.rstrip(os.sep) + os.sep)


def scan_caches(
    dirs: tuple[tuple[CacheKind, str], ...] | None = None,
    stop: threading.Event | None = None,
    clock: float | None = None,
) -> CompileCacheSample:
    """Scan every cache directory; totals count a directory inside another one only once."""
    dirs = cache_dirs() if dirs is None else dirs
    results: list[CacheDirSample] = []
    size_total = count_total = 0
    for i, (kind, path) in enumerate(dirs):
        exists, size, count = scan_dir(path, stop)
        results.append(CacheDirSample(kind, path, exists, size, count))
        counted_elsewhere = any(_inside(path, other) for j, (_, other) in enumerate(dirs) if j < i)
        counted_elsewhere = counted_elsewhere or any(
            _inside(path, other) and not _inside(other, path)
            for j, (_, other) in enumerate(dirs)
            if j > i
        )
        if not counted_elsewhere:
            size_total += size
            count_total += count
    return CompileCacheSample(
        size_bytes=size_total,
        file_count=count_total,
        scanned_ts=time.time() if clock is None else clock,
        dirs=tuple(results),
    )
