"""What every reader of a group of readings over NVML's device handles shares.

GPM (``gpm.py``) and NVLink (``nvlink.py``) each keep state per GPU between reads (a sample
buffer, counters), decide once whether a GPU can be read at all, and report a GPU's problem
once, not at every read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any


class PerGpuReader:
    """A lock per GPU, so that calls for different GPUs run at once, and a once-only log.

    The sampler reads every GPU in its own worker thread (``deadline.py``): a call hung on one
    GPU never holds up another's, and one GPU's reads never overlap.

    Args:
        nvml: pynvml (or a fake with its interface).
        handles: the device handles by index (``None`` for a GPU NVML could not open).
        log: where a GPU's problems are reported, once each.
    """

    what = "a reading"
    """What the reader reads, as its log lines say it ("NVLink throughput")."""
    missing = "nothing to read"
    """What a GPU it cannot read has not, as the log says it ("no GPM metrics")."""
    constants: tuple[str, ...] = ()
    """The names of the NVML constants it asks for (``None`` in ``_ids`` where pynvml has none)."""

    def __init__(
        self, nvml: Any, handles: Sequence[Any], log: logging.Logger | None = None
    ) -> None:
        self._nvml = nvml
        self._handles = list(handles)
        self._log = log or logging.getLogger("jupyter_gpu")
        self._locks = [threading.Lock() for _ in self._handles]
        self._ids = tuple(getattr(nvml, name, None) for name in self.constants)
        self._previous: dict[int, Any] = {}
        """index -> what its last read left to compare the next one with."""
        self._refused: dict[int, str] = {}
        """index -> why that GPU cannot be read (decided once, at its first read)."""
        self._decided: set[int] = set()
        self._reported: set[tuple[int, str]] = set()

    def _refusal(self, index: int, handle: Any) -> str | None:
        """Why GPU ``index`` cannot be read (``None``: it can), asked of NVML once."""
        if index not in self._decided:
            self._decided.add(index)
            reason = "NVML cannot open this GPU" if handle is None else self._why_not(handle)
            if reason is not None:
                self.refuse(index, reason)
        return self._refused.get(index)

    def _why_not(self, handle: Any) -> str | None:
        """Why this GPU cannot be read, asked of NVML at its first read (``None``: it can)."""
        return None

    def refuse(self, index: int, reason: str) -> None:
        """GPU ``index`` cannot be read, for ``reason``: say so at every read from now on."""
        self._refused[index] = reason
        self._decided.add(index)
        self._log.info("jupyter_gpu: GPU %d: %s: %s", index, self.missing, reason)

    def _report(self, index: int, problem: object) -> None:
        """Log ``problem`` of GPU ``index`` once (the next read meets it again)."""
        key = (index, str(problem))
        if key not in self._reported:
            self._reported.add(key)
            self._log.info("jupyter_gpu: GPU %d: %s: %s", index, self.what, problem)
