"""A thread-safe ring buffer of recent samples, each kept with its JSON text.

The sampler thread appends; the server's handlers read from the event loop. The JSON of a sample
is built once, in the sampler thread, and reused for every client and every request.
"""

from __future__ import annotations

import bisect
import threading
from collections import deque
from dataclasses import dataclass

from jupyter_gpu.readings.records import Sample


@dataclass(frozen=True, slots=True)
class Entry:
    """One sample and its JSON text (``""`` when the sampler has no encoder)."""

    sample: Sample
    json: str

    @property
    def ts(self) -> float:
        """The sample's Unix time in seconds."""
        return self.sample.ts


class History:
    """The last ``capacity`` entries, oldest first.

    Raises:
        ValueError: if ``capacity`` is below 1.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"history capacity must be at least 1, got {capacity}")
        self._entries: deque[Entry] = deque(maxlen=capacity)
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        """How many entries the buffer keeps before it drops the oldest."""
        assert self._entries.maxlen is not None
        return self._entries.maxlen

    def __len__(self) -> int:
        return len(self._entries)

    def append(self, entry: Entry) -> None:
        with self._lock:
            self._entries.append(entry)

    def latest(self) -> Entry | None:
        """The newest entry, or ``None`` before the first tick."""
        with self._lock:
            return self._entries[-1] if self._entries else None

    def since(self, ts: float | None = None) -> list[Entry]:
        """Entries with ``sample.ts > ts`` (all of them when ``ts`` is ``None``), oldest first."""
        with self._lock:
            entries = list(self._entries)
        if ts is None:
            return entries
        # Timestamps only grow (the sampler stamps each tick with time.time() after the last),
        # so a binary search finds the cut.
        cut = bisect.bisect_right(entries, ts, key=lambda e: e.sample.ts)
        return entries[cut:]
