"""How big the torch.compile caches are, and whether each may be cleared: the background scan.

A scan walks the trees with ``os.scandir`` and never follows symlinks; it is meant to run in a
background thread (a 100,000-file tree takes about a second) and stops early when asked to.
``scan_sources`` adds what the panel and the clear route need: each directory's id, whether it
holds only what torch writes (``recognise.py``) and, if not, why, and its filesystem's space.
"""

from __future__ import annotations

import os
import shutil
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from jupyter_gpu.compile_cache.locate import CacheSource, cache_dirs, cache_id
from jupyter_gpu.compile_cache.mounts import mounts_under
from jupyter_gpu.compile_cache.paths import not_utf8, printable
from jupyter_gpu.compile_cache.recognise import refusal
from jupyter_gpu.compile_cache.records import CacheDirSample, CacheKind, CompileCacheSample


def scan_dir(
    path: str,
    stop: threading.Event | None = None,
    yield_every: int = 2000,
    pause: Callable[[], object] | None = None,
) -> tuple[bool, int, int]:
    """Walk one tree: ``(exists, size_bytes, file_count)`` of its regular files.

    A missing directory is ``(False, 0, 0)``; unreadable subdirectories are skipped, and so is
    every mount point inside (another device, or a bind mount the mount table lists:
    ``mounts.py``), whose files are not the cache's. Every ``yield_every`` entries the walk gives
    up the GIL for a moment and checks ``stop``. ``pause`` is called before each directory and
    may block: the notebook's walk waits there while a figure is timed
    (``jupyter_gpu/measure/quiet.py``).
    """
    try:
        top = Path(path).stat()
    except OSError:
        return False, 0, 0
    if not stat.S_ISDIR(top.st_mode):
        return False, 0, 0
    mounts = mounts_under(os.path.realpath(path))
    size = count = seen = 0
    stack = [(path, "")]
    while stack:
        folder, rel = stack.pop()
        if pause is not None:
            pause()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    seen += 1
                    if seen % yield_every == 0:
                        if stop is not None and stop.is_set():
                            return True, size, count
                        time.sleep(0)  # let the sampler's tick and the server run
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            inner = f"{rel}{entry.name}"
                            on_dev = entry.stat(follow_symlinks=False).st_dev == top.st_dev
                            if on_dev and not mounts.at(inner):  # never into a mount point
                                stack.append((entry.path, f"{inner}/"))
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
    pause: Callable[[], object] | None = None,
) -> CompileCacheSample:
    """Scan every cache directory; totals count a directory inside another one only once.

    ``pause``: called before each directory (see :func:`scan_dir`).
    """
    dirs = cache_dirs() if dirs is None else dirs
    results: list[CacheDirSample] = []
    size_total = count_total = 0
    for i, (kind, path) in enumerate(dirs):
        exists, size, count = scan_dir(path, stop, pause=pause)
        results.append(CacheDirSample(kind, printable(path), exists, size, count))
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


def fs_space(path: str) -> tuple[int | None, int | None]:
    """``(free, total)`` bytes of the filesystem that holds ``path`` (or its nearest parent)."""
    p = Path(path)
    for candidate in (p, *p.parents):
        try:
            usage = shutil.disk_usage(candidate)
        except OSError:
            continue
        return int(usage.free), int(usage.total)
    return None, None


def scan_sources(
    sources: tuple[CacheSource, ...],
    stop: threading.Event | None = None,
    min_free_pct: float = 10.0,
) -> CompileCacheSample:
    """``scan_caches`` over these sources, with what the clear action and the panel need.

    Each directory gets its id, whether it may be cleared (and why not, naming what was found),
    and its filesystem's free space; ``low_space`` when one has less than ``min_free_pct`` free.
    A path that is not UTF-8 (from any environment: a byte no text can carry) refuses that one
    directory, with the reason; it is listed (``printable``), sized, never cleared, and the
    others are scanned as usual.
    """
    sample = scan_caches(tuple((kind, path) for kind, path, _, _ in sources), stop)
    dirs = []
    low = False
    for d, (_, path, source, configured) in zip(sample.dirs, sources, strict=True):
        reason, identity = None, None
        if d.exists:
            bad = not_utf8(path)
            if bad is not None:
                reason = f"its path is not UTF-8 text ({bad}), so it is not cleared from here"
            else:
                reason, identity = refusal(d.kind, path, configured, stop)
        free, total = fs_space(path)
        if free is not None and total:
            low = low or free / total * 100.0 < min_free_pct
        dirs.append(
            replace(
                d,
                id=cache_id(d.kind, path),
                source="kernel" if source == "kernel" else "server",
                clearable=d.exists and reason is None,
                refusal=reason,
                fs_free_bytes=free,
                fs_total_bytes=total,
                identity=identity,
            )
        )
    return replace(sample, dirs=tuple(dirs), low_space=low)
