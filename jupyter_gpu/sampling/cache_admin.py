"""Which torch.compile caches there are (the server's and its kernels'), and clearing one safely.

Kernels can have their own cache directories: a notebook started with its own
``TORCHINDUCTOR_CACHE_DIR``, ``TMPDIR`` or ``TRITON_CACHE_DIR`` (a kernel spec's ``env``, or a
launcher) compiles into them. ``kernel_cache_dirs`` reads each local kernel's environment
(``/proc/<pid>/environ`` through psutil: same user only) and resolves them as torch does.

``clear_cache`` deletes the contents of one directory, and only of a directory that validates
as an Inductor or Triton cache (``cache_refusal``): a real directory (not a symlink) owned by
this user, not a home or temp root, named as torch names it (or configured so), whose top-level
entries all look like that cache's. It never follows a symlink: a link inside is removed, never
its target; Python's ``shutil.rmtree`` on Linux walks by file descriptors and does not follow
links either. It is slow on a big cache: call it from a worker thread, never the event loop.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import psutil

from jupyter_gpu.sampling.compile_cache import CacheKind, cache_dirs, scan_caches, scan_dir
from jupyter_gpu.sampling.records import CompileCacheSample

CacheSource = tuple[CacheKind, str, str, bool]
"""``(kind, path, source, configured)``: ``source`` is ``"server"`` or ``"kernel"``;
``configured``: the path came from an environment variable rather than torch's default."""

_ENV_KEYS = ("TORCHINDUCTOR_CACHE_DIR", "TMPDIR", "TRITON_CACHE_DIR", "TRITON_HOME", "HOME", "USER")
_INDUCTOR_NAMES = frozenset(
    {
        "fxgraph",
        "aotautograd",
        "triton",
        "cache",
        "locks",
        "kernel",
        "autotune",
        "pgo",
        "aot_inductor",
        "precompile_cache",
        "cutlass",
        "cpp",
        "compiled_kernel",
        "mega_cache",
    }
)
_TWO_CHARS = re.compile(r"^[A-Za-z0-9_]{2}$")  # Inductor's per-hash code directories ("ab/")
_TRITON_HASH = re.compile(r"^[A-Za-z0-9_=-]{16,}$")  # Triton's per-kernel hash directories
_SIDE_FILES = re.compile(r"^(.*\.lock|.*\.tmp(\..*)?|tmp\..*)$")


def cache_id(kind: str, path: str) -> str:
    """The stable id a client names a cache by (never its path): 12 hex digits."""
    return hashlib.sha256(f"{kind}\0{os.path.normpath(path)}".encode()).hexdigest()[:12]


def _configured(kind: CacheKind, environ: Mapping[str, str]) -> bool:
    key = "TORCHINDUCTOR_CACHE_DIR" if kind == "inductor" else "TRITON_CACHE_DIR"
    return key in environ


def _resolved(environ: Mapping[str, str]) -> tuple[tuple[CacheKind, str], ...]:
    """``cache_dirs`` for another process's environment (its TMPDIR and user, not ours)."""
    dirs = list(cache_dirs(environ))
    if "TORCHINDUCTOR_CACHE_DIR" not in environ and "TMPDIR" in environ:
        user = environ.get("USER") or Path(dirs[0][1]).name.removeprefix("torchinductor_")
        safe = re.sub(r'[\\/:*?"<>|]', "_", user)
        dirs[0] = ("inductor", str(Path(environ["TMPDIR"]) / f"torchinductor_{safe}"))
    return tuple(dirs)


def server_cache_dirs(environ: Mapping[str, str] | None = None) -> tuple[CacheSource, ...]:
    """This server's own caches, resolved from its environment."""
    env = os.environ if environ is None else environ
    return tuple((kind, path, "server", _configured(kind, env)) for kind, path in cache_dirs(env))


def kernel_cache_dirs(pids: Iterable[int]) -> tuple[CacheSource, ...]:
    """The caches the kernels with these pids use, from their environments (unreadable: skipped)."""
    out: list[CacheSource] = []
    for pid in pids:
        try:
            environ = psutil.Process(pid).environ()
        except (psutil.Error, OSError):  # gone, another user's, or no /proc
            continue
        env = {k: v for k, v in environ.items() if k in _ENV_KEYS}
        for kind, path in _resolved(env):
            out.append((kind, path, "kernel", _configured(kind, env)))
    return tuple(out)


def merge_sources(*groups: Iterable[CacheSource]) -> tuple[CacheSource, ...]:
    """One entry per (kind, path), the first seen winning (the server's before the kernels')."""
    seen: dict[tuple[str, str], CacheSource] = {}
    for group in groups:
        for kind, path, source, configured in group:
            key = (kind, os.path.normpath(path))
            if key not in seen:
                seen[key] = (kind, path, source, configured)
            elif configured and not seen[key][3]:
                seen[key] = (kind, seen[key][1], seen[key][2], True)
    return tuple(seen.values())


def _protected(path: str) -> bool:
    norm = os.path.normpath(path)
    roots = {
        "/",
        os.path.normpath(str(Path("~").expanduser())),
        os.path.normpath(tempfile.gettempdir()),
        "/tmp",  # noqa: S108 (a path we refuse to clear, not one we write to)
        "/var/tmp",  # noqa: S108 (as above)
        "/root",
        "/home",
        "/usr",
        "/etc",
        "/var",
    }
    return norm in roots or len(Path(norm).parts) < 3


def cache_refusal(kind: CacheKind, path: str, configured: bool = False) -> str | None:
    """Why ``path`` must not be cleared as a ``kind`` cache (``None``: it may be).

    Checks, without following any symlink: it exists and is a directory itself (not a link),
    is owned by this user, is not a root such as ``/tmp`` or a home directory, carries torch's
    name for it (``torchinductor_*``, ``.triton/cache``) unless an environment variable set it,
    and every entry at its top level looks like that cache's own.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "it does not exist (nothing to clear)"
    except OSError as err:
        return f"it cannot be read ({err.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "it is a symlink (the target is never cleared through a link)"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    getuid = getattr(os, "getuid", None)
    if callable(getuid) and st.st_uid != getuid():
        return "it belongs to another user"
    if _protected(path):
        return "it is a top-level or home directory, not a cache"
    norm = os.path.normpath(path)
    if kind == "inductor":
        named = Path(norm).name.startswith("torchinductor")
    else:
        named = Path(norm).parts[-2:] == (".triton", "cache")
    if not named and not configured:
        return f"its name is not the one torch gives a {kind} cache"
    try:
        with os.scandir(path) as entries:
            names = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
    except OSError as err:
        return f"it cannot be listed ({err.strerror})"
    for name, is_dir in names:
        if _SIDE_FILES.match(name):
            continue
        if kind == "inductor" and (name in _INDUCTOR_NAMES or _TWO_CHARS.match(name)):
            continue
        if kind == "triton" and is_dir and _TRITON_HASH.match(name):
            continue
        return f"it holds {name!r}, which is not part of a {kind} cache"
    return None


@dataclass(frozen=True, slots=True)
class ClearResult:
    """What ``clear_cache`` did: bytes and files removed, and entries it could not remove."""

    freed_bytes: int
    files_removed: int
    failed: tuple[str, ...] = ()


def clear_cache(kind: CacheKind, path: str, configured: bool = False) -> ClearResult:
    """Delete everything inside a validated cache directory (the directory itself stays).

    Raises:
        PermissionError: ``cache_refusal`` refused the directory (its message says why).
    """
    reason = cache_refusal(kind, path, configured)
    if reason is not None:
        raise PermissionError(f"Not clearing {path}: {reason}.")
    if not shutil.rmtree.avoids_symlink_attacks:  # not on Linux: refuse rather than risk it
        raise PermissionError("Not clearing: this platform's rmtree may follow symlinks.")
    freed = removed = 0
    failed: list[str] = []
    with os.scandir(path) as it:
        entries = list(it)
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                _, size, count = scan_dir(entry.path)
                shutil.rmtree(entry.path)
            elif entry.is_symlink():  # unlink the link, never its target; counted as scans do: 0
                size, count = 0, 0
                os.unlink(entry.path)  # noqa: PTH108 (DirEntry path; unlink removes the link)
            else:
                size, count = entry.stat(follow_symlinks=False).st_size, 1
                os.unlink(entry.path)  # noqa: PTH108 (as above)
        except OSError as err:
            failed.append(f"{entry.name}: {err.strerror}")
            continue
        freed += size
        removed += count
    return ClearResult(freed, removed, tuple(failed))


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

    Each directory gets its id, whether it may be cleared (and why not), and its filesystem's
    free space; ``low_space`` when one has less than ``min_free_pct`` free.
    """
    sample = scan_caches(tuple((kind, path) for kind, path, _, _ in sources), stop)
    dirs = []
    low = False
    for d, (_, _, source, configured) in zip(sample.dirs, sources, strict=True):
        refusal = cache_refusal(d.kind, d.path, configured) if d.exists else None
        free, total = fs_space(d.path)
        if free is not None and total:
            low = low or free / total * 100.0 < min_free_pct
        dirs.append(
            replace(
                d,
                id=cache_id(d.kind, d.path),
                source="kernel" if source == "kernel" else "server",
                clearable=d.exists and refusal is None,
                refusal=refusal,
                fs_free_bytes=free,
                fs_total_bytes=total,
            )
        )
    return replace(sample, dirs=tuple(dirs), low_space=low)
