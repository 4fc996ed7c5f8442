"""The records of a compile-cache scan: each directory, and the totals a ``Sample`` carries.

``to_dict()`` (``jupyter_gpu.json_record``) gives the JSON shape of ``docs/api.md``
(``compile_cache`` of a sample).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from jupyter_gpu.json_record import NOT_IN_JSON, JsonRecord

CacheKind = Literal["inductor", "triton"]


@dataclass(frozen=True, slots=True)
class CacheDirSample(JsonRecord):
    """One torch.compile cache directory on disk (a missing directory has size 0).

    ``id`` is how a client names it (``POST compile-cache/clear``), never by path; ``source``
    is ``"server"`` (the server's own environment) or ``"kernel"`` (a kernel's own
    ``TORCHINDUCTOR_CACHE_DIR``/``TMPDIR``/``TRITON_CACHE_DIR``); ``clearable`` says whether
    it holds only what torch writes (``recognise.py``), ``refusal`` why not, naming what was
    found; ``fs_*`` are the free and total bytes of its filesystem.
    """

    kind: CacheKind
    path: str
    exists: bool
    size_bytes: int
    file_count: int
    id: str = ""
    source: Literal["server", "kernel"] = "server"
    clearable: bool = False
    refusal: str | None = None
    fs_free_bytes: int | None = None
    fs_total_bytes: int | None = None
    identity: tuple[int, int] | None = field(default=None, compare=False, metadata=NOT_IN_JSON)
    """``(st_dev, st_ino)`` of the directory the scan recognised; not part of the API: the clear
    route refuses a directory that is no longer this one (replaced since the scan)."""


@dataclass(frozen=True, slots=True)
class CompileCacheSample(JsonRecord):
    """The torch.compile caches: totals (a directory inside another counts once) and each dir.

    ``scanned_ts`` is when the last background scan finished (``None`` before the first one:
    then the sizes are not known yet, not 0). ``low_space``: a cache's filesystem has less than
    ``JupyterGpu.cache_min_free_pct`` free.
    """

    size_bytes: int
    file_count: int
    scanned_ts: float | None
    dirs: tuple[CacheDirSample, ...] = ()
    low_space: bool = False


NOT_SCANNED = CompileCacheSample(size_bytes=0, file_count=0, scanned_ts=None)
