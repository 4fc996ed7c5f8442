"""The torch.compile cache on disk, for notebook 06: where it lives, bounding it, clearing it.

Inductor writes its cache as many small files under one folder (``TORCHINDUCTOR_CACHE_DIR``,
by default ``<tempdir>/torchinductor_<user>``): generated code, compiled graphs, and Triton's
kernels under ``triton/``. Each *entry* is a folder that holds files (a Triton kernel, a cached
graph) or a file at the top; removing a whole entry is a cache miss next time, never a broken
entry, which is how :func:`bound_cache` trims. :func:`clear_cache` removes the whole folder, and
refuses while a compile holds one of the cache's lock files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

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


def _check_cache_dir(cache_dir: Path) -> None:
    home = Path("~").expanduser().resolve()
    resolved = cache_dir.resolve()
    if resolved in (Path("/"), home) or len(resolved.parts) < 3:
        raise ValueError(f"{cache_dir} does not look like a compile cache folder: refusing")


def bound_cache(cache_dir: str | Path, max_bytes: int) -> int:
    """Remove the oldest entries until the cache holds at most ``max_bytes``; bytes removed.

    Raises:
        ValueError: ``cache_dir`` is ``/``, the home folder or another short path.
        RuntimeError: a compile is running (it holds a lock file in the cache).
    """
    root = Path(cache_dir)
    _check_cache_dir(root)
    if compile_running(root):
        raise RuntimeError(f"a compile is running in {root}: try again when it is done")
    found = entries(root)
    total = sum(e.size_bytes for e in found)
    removed = 0
    for entry in found:
        if total - removed <= max_bytes:
            break
        if entry.path.is_dir():
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            entry.path.unlink(missing_ok=True)
        removed += entry.size_bytes
    return removed


def clear_cache(cache_dir: str | Path) -> int:
    """Remove the whole cache folder (the next compile starts cold); bytes removed.

    Raises:
        ValueError: ``cache_dir`` is ``/``, the home folder or another short path.
        RuntimeError: a compile is running (it holds a lock file in the cache).
    """
    root = Path(cache_dir)
    _check_cache_dir(root)
    if compile_running(root):
        raise RuntimeError(f"a compile is running in {root}: try again when it is done")
    size = cache_bytes(root)
    shutil.rmtree(root, ignore_errors=True)
    return size
