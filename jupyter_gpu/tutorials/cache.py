"""The torch.compile cache on disk, for notebook 06: where it lives, bounding it, clearing it.

Inductor writes its cache as many small files under one folder (``TORCHINDUCTOR_CACHE_DIR``,
by default ``<tempdir>/torchinductor_<user>``): generated code, compiled graphs, and Triton's
kernels under ``triton/``. Each *entry* is a folder that holds files (a Triton kernel, a cached
graph) or a file at the top; removing a whole entry is a cache miss next time, never a broken
entry, which is how :func:`bound_cache` trims. :func:`clear_cache` removes the whole folder.

Both delete through ``jupyter_gpu.compile_cache``, as the server's Clear button does: only a
folder that holds nothing but what torch writes, never through a link, and not while a compile
holds one of the cache's lock files.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from jupyter_gpu.compile_cache import CacheRefused, CompileRunning, trim_cache
from jupyter_gpu.compile_cache import clear_cache as _clear

try:
    import fcntl
except ImportError:  # not on Windows; the lock check is skipped there
    fcntl = None  # type: ignore[assignment]


@dataclass(frozen=True)
class Entry:
    """One removable piece of a cache: a folder of files, or a file at the top."""

    path: Path
    size_bytes: int
    newest_mtime: float


def filesystem_of(path: str | Path) -> tuple[str, str]:
    """``(mount point, filesystem type)`` holding ``path`` (Linux ``/proc/mounts``).

    ``("", "unknown")`` where that file cannot be read. ``tmpfs`` means the files live in memory.
    """
    target = os.path.realpath(path)
    best, kind = "", "unknown"
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return best, kind
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        mount = parts[1].replace("\\040", " ")
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) > len(best):
            best, kind = mount, parts[2]
    return best, kind


def entries(cache_dir: str | Path) -> list[Entry]:
    """The cache's removable entries, oldest first (by their newest file)."""
    root = Path(cache_dir)
    found: list[Entry] = []
    if not root.is_dir():
        return found
    for folder, _, files in os.walk(root):
        here = Path(folder)
        if not files or here.name == "locks":
            continue
        stats = []
        for name in files:
            with contextlib.suppress(OSError):
                stats.append((here / name).lstat())
        if not stats:
            continue
        size = sum(s.st_size for s in stats)
        newest = max(s.st_mtime for s in stats)
        if here == root:  # files at the top: each its own entry
            found += [
                Entry(here / n, s.st_size, s.st_mtime) for n, s in zip(files, stats, strict=False)
            ]
        else:
            found.append(Entry(here, size, newest))
    return sorted(found, key=lambda e: e.newest_mtime)


def cache_bytes(cache_dir: str | Path) -> int:
    """Bytes in the cache's files."""
    return sum(e.size_bytes for e in entries(cache_dir))


def compile_running(cache_dir: str | Path) -> bool:
    """Whether some process holds one of the cache's lock files (a compile in progress)."""
    locks = Path(cache_dir) / "locks"
    if fcntl is None or not locks.is_dir():
        return False
    for lock in locks.glob("*.lock"):
        try:
            with lock.open("a") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(handle, fcntl.LOCK_UN)
        except BlockingIOError:
            return True
        except OSError:
            continue
    return False


def _through_the_package(cache_dir: Path, delete: Callable[[], int]) -> int:
    """Run one deletion of the compile-cache package, in this module's exceptions."""
    if not cache_dir.exists():
        return 0
    try:
        return delete()
    except CompileRunning:
        raise RuntimeError(
            f"a compile is running in {cache_dir}: try again when it is done"
        ) from None
    except CacheRefused as err:
        raise ValueError(
            f"{cache_dir} is not a compile cache folder ({err.reason}): refusing"
        ) from None


def bound_cache(cache_dir: str | Path, max_bytes: int) -> int:
    """Remove the oldest entries until the cache holds at most ``max_bytes``; bytes removed.

    Raises:
        ValueError: ``cache_dir`` is ``/``, the home folder or another short path, or holds
            something torch does not write (the message names it); nothing is removed then.
        RuntimeError: a compile is running (it holds a lock file in the cache).
    """
    root = Path(cache_dir)
    return _through_the_package(
        root, lambda: trim_cache("inductor", str(root), max_bytes, configured=True).freed_bytes
    )


def clear_cache(cache_dir: str | Path) -> int:
    """Remove the whole cache folder (the next compile starts cold); bytes removed.

    Raises:
        ValueError, RuntimeError: as :func:`bound_cache` (nothing is removed then).
    """
    root = Path(cache_dir)
    return _through_the_package(
        root,
        lambda: _clear("inductor", str(root), configured=True, remove_root=True).freed_bytes,
    )
