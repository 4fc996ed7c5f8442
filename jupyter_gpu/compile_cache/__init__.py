"""The torch.compile caches on disk: where they are, how big, whether torch wrote them, clearing.

The only package in the project that deletes files. It imports neither torch nor NVML.

- ``locate``: where torch and Triton put their caches, for the server and for each kernel.
- ``scan``: their size and file count, walked in a background thread, and whether each may be
  cleared (``scan_sources``).
- ``shapes`` and ``recognise``: a cache is recognised by what torch writes into it, the folders
  it makes and how it names the files in them, never by a list of names a user's folder can
  match; anything else is refused with a reason that names what was found.
- ``clear``: deleting a recognised cache, or its oldest entries, through file descriptors; and
  what other parts of jupyter-gpu made: scratch folders (``remove_folder_made_here``), a file's
  temporary name (``remove_file_made_here``).
- ``mounts``: the mount points no walk crosses (a bind mount has the same device number).
- ``paths``: a path that is not UTF-8, shown and refused (``printable``, ``not_utf8``).
"""

from __future__ import annotations

from jupyter_gpu.compile_cache.clear import (
    ClearResult,
    CompileRunning,
    clear_cache,
    remove_file_made_here,
    remove_folder_made_here,
    trim_cache,
)
from jupyter_gpu.compile_cache.locate import (
    CacheSource,
    cache_dirs,
    cache_id,
    inductor_cache_dir,
    kernel_cache_dirs,
    merge_sources,
    server_cache_dirs,
    triton_cache_dir,
)
from jupyter_gpu.compile_cache.paths import not_utf8, printable
from jupyter_gpu.compile_cache.recognise import CacheRefused, refusal
from jupyter_gpu.compile_cache.records import (
    NOT_SCANNED,
    CacheDirSample,
    CacheKind,
    CompileCacheSample,
)
from jupyter_gpu.compile_cache.scan import scan_caches, scan_dir, scan_sources

__all__ = [
    "NOT_SCANNED",
    "CacheDirSample",
    "CacheKind",
    "CacheRefused",
    "CacheSource",
    "ClearResult",
    "CompileCacheSample",
    "CompileRunning",
    "cache_dirs",
    "cache_id",
    "clear_cache",
    "inductor_cache_dir",
    "kernel_cache_dirs",
    "merge_sources",
    "not_utf8",
    "printable",
    "refusal",
    "remove_file_made_here",
    "remove_folder_made_here",
    "scan_caches",
    "scan_dir",
    "scan_sources",
    "server_cache_dirs",
    "trim_cache",
    "triton_cache_dir",
]
