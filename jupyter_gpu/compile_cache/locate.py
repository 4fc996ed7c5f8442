r"""Where the torch.compile caches are: the server's own, and each kernel's.

The locations are resolved the way torch and Triton resolve them, without importing either:

- Inductor: ``$TORCHINDUCTOR_CACHE_DIR`` (made absolute), else
  ``<tempdir>/torchinductor_<user>`` where the user name has ``\\/:*?"<>|`` replaced by ``_``
  (``uid_<uid>`` if there is no user name); as ``torch/_inductor/runtime/cache_dir_utils.py``.
- Triton: ``$TRITON_CACHE_DIR``, else ``$TRITON_HOME/.triton/cache`` with ``$TRITON_HOME``
  defaulting to the home directory; as ``triton/knobs.py``. (Kernels that Inductor compiles with
  Triton go under the Inductor directory unless ``$TRITON_CACHE_DIR`` is set.)

Kernels can have their own cache directories: a notebook started with its own
``TORCHINDUCTOR_CACHE_DIR``, ``TMPDIR`` or ``TRITON_CACHE_DIR`` (a kernel spec's ``env``, or a
launcher) compiles into them. ``kernel_cache_dirs`` reads each local kernel's environment
(``/proc/<pid>/environ`` through psutil: same user only) and resolves them as torch does, in
that process: a relative path against the kernel's own working folder (``/proc/<pid>/cwd``),
never the server's.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import psutil

from jupyter_gpu.compile_cache.records import CacheKind

CacheSource = tuple[CacheKind, str, str, bool]
"""``(kind, path, source, configured)``: ``source`` is ``"server"`` or ``"kernel"``;
``configured``: the path came from an environment variable rather than torch's default."""

_UNSAFE_IN_USERNAME = re.compile(r'[\\/:*?"<>|]')
_ENV_KEYS = ("TORCHINDUCTOR_CACHE_DIR", "TMPDIR", "TRITON_CACHE_DIR", "TRITON_HOME", "HOME", "USER")
# The variables holding a path that the kernel's torch, tempfile or Triton would resolve against
# that kernel's working folder when relative (torch: os.path.abspath; tempfile: the same).
_RELATIVE_TO_CWD = ("TORCHINDUCTOR_CACHE_DIR", "TMPDIR", "TRITON_CACHE_DIR", "TRITON_HOME")


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
    """The cache directories to watch, in a fixed order (Inductor, then Triton).

    With ``TORCHINDUCTOR_CACHE_DIR`` set, torch's default Inductor directory comes second: torch
    2.8+ still writes its precompiled headers there whatever the variable says (155 MB for one
    header with torch 2.13), so a configured cache alone would hide them.
    """
    env = os.environ if environ is None else environ
    dirs: list[tuple[CacheKind, str]] = [("inductor", inductor_cache_dir(env))]
    if "TORCHINDUCTOR_CACHE_DIR" in env:
        unset = {k: v for k, v in env.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
        default = inductor_cache_dir(unset)
        if os.path.normpath(default) != os.path.normpath(dirs[0][1]):
            dirs.append(("inductor", default))
    return (*dirs, ("triton", triton_cache_dir(env)))


def cache_id(kind: str, path: str) -> str:
    """The stable id a client names a cache by (never its path): 12 hex digits.

    Made from the path's bytes (``os.fsencode``), so that a path that is not UTF-8 has one too.
    """
    named = f"{kind}\0".encode() + os.fsencode(os.path.normpath(path))
    return hashlib.sha256(named).hexdigest()[:12]


def _configured(kind: CacheKind, path: str, environ: Mapping[str, str]) -> bool:
    """Whether ``path`` is the one an environment variable named (not torch's default)."""
    key = "TORCHINDUCTOR_CACHE_DIR" if kind == "inductor" else "TRITON_CACHE_DIR"
    if key not in environ:
        return False
    named = os.path.abspath(environ[key]) if kind == "inductor" else environ[key]  # noqa: PTH100
    return os.path.normpath(named) == os.path.normpath(path)


def _resolved(environ: Mapping[str, str]) -> tuple[tuple[CacheKind, str], ...]:
    """``cache_dirs`` for another process's environment (its TMPDIR and user, not ours)."""
    dirs = list(cache_dirs(environ))
    if "TMPDIR" in environ:  # torch's default under the kernel's TMPDIR and user, not ours
        at = 1 if "TORCHINDUCTOR_CACHE_DIR" in environ else 0
        if dirs[at][0] == "inductor":
            user = environ.get("USER") or Path(dirs[at][1]).name.removeprefix("torchinductor_")
            safe = _UNSAFE_IN_USERNAME.sub("_", user)
            dirs[at] = ("inductor", str(Path(environ["TMPDIR"]) / f"torchinductor_{safe}"))
    return tuple(dirs)


def server_cache_dirs(environ: Mapping[str, str] | None = None) -> tuple[CacheSource, ...]:
    """This server's own caches, resolved from its environment."""
    env = os.environ if environ is None else environ
    return tuple(
        (kind, path, "server", _configured(kind, path, env)) for kind, path in cache_dirs(env)
    )


def _relative_made_absolute(environ: Mapping[str, str], cwd: str) -> dict[str, str]:
    """``environ`` with each relative cache path joined to ``cwd`` (a kernel's working folder).

    torch makes ``TORCHINDUCTOR_CACHE_DIR`` absolute in the kernel (``os.path.abspath``, at its
    first compile), tempfile does the same with ``TMPDIR``, and Triton opens its paths as they
    are: all against the kernel's working folder, which the server reads as ``/proc/PID/cwd``.
    (A notebook that changed folder before its first compile resolved it against that one.)
    An empty ``TMPDIR`` is ignored, as tempfile ignores it.
    """
    env = dict(environ)
    if env.get("TMPDIR") == "":
        del env["TMPDIR"]
    for key in _RELATIVE_TO_CWD:
        value = env.get(key)
        if value is not None and not value.startswith("/"):
            env[key] = os.path.normpath(os.path.join(cwd, value))  # noqa: PTH118 (as torch)
    return env


def _needs_cwd(environ: Mapping[str, str]) -> bool:
    return any(not environ.get(key, "/").startswith("/") for key in _RELATIVE_TO_CWD)


def kernel_cache_dirs(pids: Iterable[int]) -> tuple[CacheSource, ...]:
    """The caches the kernels with these pids use, from their environments (unreadable: skipped).

    A relative path is resolved against that kernel's working folder (``/proc/PID/cwd``); a
    kernel whose folder cannot be read then is skipped (it is gone, or not this user's).
    """
    out: list[CacheSource] = []
    for pid in pids:
        try:
            process = psutil.Process(pid)
            environ = process.environ()
            env = {k: v for k, v in environ.items() if k in _ENV_KEYS}
            if _needs_cwd(env):
                env = _relative_made_absolute(env, process.cwd())
        except (psutil.Error, OSError):  # gone, another user's, or no /proc
            continue
        for kind, path in _resolved(env):
            out.append((kind, path, "kernel", _configured(kind, path, env)))
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
