"""The CUDA allocator's peak over a stretch of code, measured without touching torch's counter.

``torch.cuda.max_memory_allocated()`` is the highest ``allocated_bytes`` since the process
started or since the last ``reset_peak_memory_stats()``, which sets it to the memory in use
now. torch offers no way to set it back to an earlier value, so a magic that resets it to
measure a cell destroys the user's peak for good. Nothing here resets it:

- if the stretch raised the counter above its value before (or the counter stood at the memory
  in use when the stretch began), the counter after it *is* the stretch's peak, exactly;
- otherwise the stretch stayed below an earlier peak and the counter cannot tell how high it
  went. The allocator's own trace tells: ``torch.cuda.memory._record_memory_history`` records
  every allocation and free (without stacks here: ``context=None`` gathers none, which keeps it
  cheap), and replaying it from the bytes in use at the start gives the stretch's peak exactly
  in the sizes the code *requested* (the trace's sizes; torch's ``requested_bytes`` counter),
  which the allocator rounds up (to 512 bytes, or a whole cached block) when it counts
  ``allocated_bytes``. The trace is recorded only when it can matter (an earlier peak above
  the memory in use) and only when the user records no history of their own.

The counter, and the user's own history recording, are left exactly as they were.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from jupyter_gpu.magics.shell.lazy_torch import torch_module

#: Allocator events kept in the trace; a stretch that makes more loses its first ones (then
#: the trace gives no figure).
MAX_ENTRIES = 1_000_000


@dataclass(frozen=True)
class PeakReading:
    """One stretch's peak on one CUDA device (bytes).

    ``peak_bytes`` is the allocated peak when it is known exactly (``source == "counter"``);
    ``requested_peak_bytes`` the peak of the bytes requested, from the allocator's trace
    (``source == "trace"``). ``counter_before_bytes`` is ``max_memory_allocated()`` before the
    stretch, which it still reads afterwards unless the stretch went higher.
    """

    device: int
    start_bytes: int
    requested_start_bytes: int
    counter_before_bytes: int
    source: str
    peak_bytes: int | None = None
    requested_peak_bytes: int | None = None
    #: Why no figure is known (``source == "none"``).
    note: str = ""

    @property
    def above_start_bytes(self) -> int | None:
        """How far the stretch's peak rose above the memory in use when it began."""
        if self.peak_bytes is not None:
            return max(0, self.peak_bytes - self.start_bytes)
        if self.requested_peak_bytes is not None:
            return max(0, self.requested_peak_bytes - self.requested_start_bytes)
        return None


def history_enabled() -> bool:
    """Whether the allocator records its history now (someone's ``_record_memory_history``)."""
    import torch  # loaded already: a PeakWatch asks

    is_on = getattr(torch._C, "_cuda_isHistoryEnabled", None)
    return bool(is_on()) if is_on is not None else False


def replay_peak(trace: list[dict[str, Any]], start: int) -> int:
    """The highest requested-bytes level in an allocator trace, counted from ``start``.

    torch's ``requested_bytes`` rises at each ``alloc`` and falls at each ``free_completed``
    (a block freed on one stream but used on another is released once its events are done).
    """
    level = peak = start
    for event in trace:
        action = event.get("action")
        if action == "alloc":
            level += int(event.get("size", 0))
            peak = max(peak, level)
        elif action == "free_completed":
            level -= int(event.get("size", 0))
    return peak


class PeakWatch:
    """Measure one stretch's peak on CUDA device ``device``: ``start()``, the code, ``stop()``.

    ``trace``: record the allocator's history when the counter alone could not tell (see the
    module doc); ``always_trace``: record it whenever the user does not (``%amp compare`` reads
    every mode's peak in the same, requested, terms).
    """

    def __init__(self, device: int, *, trace: bool = True, always_trace: bool = False) -> None:
        torch_module()  # the UsageError that says how to install torch, where it is missing
        self.device = device
        self.trace = trace
        self.always_trace = always_trace
        self.ours = False
        self.start_bytes = self.requested_start = self.counter_before = 0

    def _stats(self) -> dict[str, Any]:
        import torch

        return dict(torch.cuda.memory_stats(self.device))

    def start(self) -> None:
        import torch

        stats = self._stats()
        self.start_bytes = int(stats.get("allocated_bytes.all.current", 0))
        self.requested_start = int(stats.get("requested_bytes.all.current", 0))
        self.counter_before = int(stats.get("allocated_bytes.all.peak", 0))
        ambiguous = self.counter_before > self.start_bytes
        if self.trace and (ambiguous or self.always_trace) and not history_enabled():
            memory = torch.cuda.memory
            kwargs: dict[str, Any] = {"context": None, "stacks": "python"}
            kwargs["max_entries"] = MAX_ENTRIES
            if "clear_history" in inspect.signature(memory._record_memory_history).parameters:
                kwargs["clear_history"] = True
            memory._record_memory_history("all", **kwargs)
            self.ours = True

    def stop(self, snapshot: dict[str, Any] | None = None, max_entries: int = 0) -> PeakReading:
        """The reading; always stops the recording this watch started.

        ``snapshot``: an allocator snapshot the caller recorded over the same stretch, from an
        empty history (``%%memsummary --snapshot``), of at most ``max_entries`` events.
        """
        import torch

        after = int(self._stats().get("allocated_bytes.all.peak", 0))
        if self.ours:
            memory = torch.cuda.memory
            try:
                snapshot = memory._snapshot()
            finally:
                memory._record_memory_history(None)
                self.ours = False
            max_entries = MAX_ENTRIES
        requested = self._replayed(snapshot, max_entries)

        def reading(source: str, peak: int | None = None, note: str = "") -> PeakReading:
            return PeakReading(
                self.device,
                self.start_bytes,
                self.requested_start,
                self.counter_before,
                source,
                peak_bytes=peak,
                requested_peak_bytes=requested,
                note=note,
            )

        if after > self.counter_before or self.counter_before == self.start_bytes:
            return reading("counter", after)
        if requested is not None:
            return reading("trace")
        if snapshot is None:
            note = (
                "your own memory-history recording is on, so no trace of this stretch alone"
                if history_enabled()
                else "no allocator trace was recorded"
            )
        else:
            note = f"the allocator trace overflowed its {max_entries:,} entries"
        return reading("none", note=note)

    def _replayed(self, snapshot: dict[str, Any] | None, max_entries: int) -> int | None:
        if snapshot is None:
            return None
        traces = snapshot.get("device_traces", [])
        trace = traces[self.device] if self.device < len(traces) else []
        if max_entries and len(trace) >= max_entries:
            return None  # the ring buffer wrapped: its first events are lost
        return replay_peak(trace, self.requested_start)
