"""This process's resident memory and its lifetime peak, read together (``%%memsummary`` on CPU).

On Linux both come from one read of ``/proc/self/status``: ``VmRSS`` (resident now) and
``VmHWM`` (the high-water mark), which the kernel computes together (``task_mem`` in
``fs/proc/task_mmu.c``: the larger of the resident size it just summed and the recorded
high-water mark), so the peak is never below the resident size beside it. ``getrusage``'s
``ru_maxrss`` is not used there: it reads the kernel's per-CPU RSS counters without summing
them (an approximation), where ``VmRSS`` and psutil's ``rss`` (``/proc/self/statm``) sum them;
on Linux 6.18 ``ru_maxrss`` read 68 to 192 KiB below ``VmHWM`` in each of 100 reads while the
process grew, so a cell's "peak" came out below its end. Elsewhere (macOS) psutil's ``rss``
and ``ru_maxrss`` (bytes there) are read, and a peak below the resident size read with it is
not taken as a peak.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psutil

_STATUS = Path("/proc/self/status")


@dataclass(frozen=True)
class ProcessMemory:
    """Resident memory now and the process's lifetime peak of it (bytes; ``None``: not read).

    ``peak_bytes`` is at least ``rss_bytes`` whenever both are given. ``nvidia-smi`` has no
    twin; ``grep -E 'VmRSS|VmHWM' /proc/PID/status`` reads the same on Linux.
    """

    rss_bytes: int | None
    peak_bytes: int | None


def parse_status(text: str) -> ProcessMemory:
    """``VmRSS`` and ``VmHWM`` of a ``/proc/PID/status`` text (the kernel writes them in kB)."""
    fields: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            number, _, unit = value.strip().partition(" ")
            if number.isdigit() and unit == "kB":
                fields[name] = int(number) * 1024
    return _consistent(fields.get("VmRSS"), fields.get("VmHWM"))


def _consistent(rss: int | None, peak: int | None) -> ProcessMemory:
    # A peak below the resident size read with it is no peak: not measured.
    if rss is not None and peak is not None and peak < rss:
        peak = None
    return ProcessMemory(rss, peak)


def read_process_memory() -> ProcessMemory:
    """This process's :class:`ProcessMemory` now (never raises: ``None`` where not read)."""
    try:
        return parse_status(_STATUS.read_text())
    except OSError:  # not Linux (or no /proc): psutil and getrusage
        pass
    try:
        rss: int | None = int(_this_process().memory_info().rss)
    except (ImportError, OSError):
        rss = None
    try:
        import resource

        scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB elsewhere
        peak: int | None = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * scale
    except (ImportError, OSError):
        peak = None
    return _consistent(rss, peak)


@functools.cache
def _this_process() -> psutil.Process:
    """``psutil.Process()`` of this process, made once (it reads /proc when made)."""
    import psutil

    return psutil.Process()
