"""What ``%memsummary`` and ``%%memsummary`` return (``-o``) and what their reports show."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jupyter_gpu.magics.output.render import fmt_bytes

from .tensors import TensorInfo
from .timeline import MemoryTimeline

if TYPE_CHECKING:
    from jupyter_gpu.magics.probes.peak import PeakReading


@dataclass
class MemorySummary:
    """What ``%memsummary -o`` returns (bytes; ``None`` where not measured, e.g. on CPU).

    ``held_by_last_error_bytes``: tensors that only the last error's traceback (its frames'
    variables) keeps alive; ``held_by_outputs_bytes``: tensors that only IPython's output
    history (``Out[n]``) keeps alive. A tensor both hold counts once, under ``Out[]``.
    """

    device: str
    allocated_bytes: int | None
    reserved_bytes: int | None
    peak_bytes: int | None
    fragmentation_bytes: int | None
    alloc_retries: int | None
    ooms: int | None
    nvml_used_bytes: int | None
    nvml_reason: str | None
    context_bytes: int | None = None
    """A bare CUDA context on this GPU, measured once in a fresh process (``context.py``)."""
    context_reason: str | None = None
    """Why ``context_bytes`` was not measured."""
    tensors: list[TensorInfo] = field(default_factory=list)
    unnamed_bytes: int = 0
    held_by_last_error_bytes: int = 0
    held_by_outputs_bytes: int = 0
    last_error_was_oom: bool = False

    def __repr__(self) -> str:
        return (
            f"<MemorySummary {self.device}: allocated {fmt_bytes(self.allocated_bytes)}, "
            f"reserved {fmt_bytes(self.reserved_bytes)}, peak {fmt_bytes(self.peak_bytes)}, "
            f"{len(self.tensors)} largest tensors listed>"
        )


@dataclass
class CellMemory:
    """What ``%%memsummary -o`` returns: the cell's memory before/after and its peak (bytes).

    On CUDA the figures are the caching allocator's; on CPU, the process's resident memory.
    ``peak_before_bytes`` is torch's peak counter before the cell; the magic never resets it,
    so it still reads that unless the cell went higher. ``peak_bytes`` is the cell's allocated
    peak where it is known exactly (the cell raised the counter, or CUDA started in it);
    otherwise ``peak`` (a ``PeakReading``) holds the peak of the bytes requested, from the
    allocator's trace of the cell (``peak.source == "trace"``). ``best_known_peak_bytes`` is
    one figure for both cases.

    On CPU, ``peak_before_bytes`` is the process's peak resident size before the cell
    (``None``: not measured), and ``peak_bytes`` that peak after the cell when the cell raised
    it; each is read with the resident size beside it, so it is never below the start or the
    end (``probes/process_memory.py``).
    """

    device: str
    before_bytes: int | None
    after_bytes: int | None
    peak_bytes: int | None
    peak_before_bytes: int | None
    reserved_before_bytes: int | None = None
    reserved_after_bytes: int | None = None
    timeline: MemoryTimeline | None = None
    timeline_unavailable: str | None = None  # why --snapshot drew no timeline (no CUDA)
    value: Any = None
    failed: bool = False
    out_of_memory: bool = False
    #: How the peak was measured (CUDA; ``None`` if CUDA started in the cell, or on CPU).
    peak: PeakReading | None = None

    def __repr__(self) -> str:
        requested = self.peak.requested_peak_bytes if self.peak is not None else None
        if self.peak_bytes is None and requested is not None:
            # The cell stayed below an earlier peak: the trace's figure, in its own terms.
            peak = f"peak {fmt_bytes(requested)} requested"
        else:
            peak = f"peak {fmt_bytes(self.peak_bytes)}"
        return (
            f"<CellMemory {self.device}: {fmt_bytes(self.before_bytes)} -> "
            f"{fmt_bytes(self.after_bytes)}, {peak}"
            f"{', timeline' if self.timeline else ''}{', failed' if self.failed else ''}>"
        )

    @property
    def delta_bytes(self) -> int | None:
        """After minus before."""
        if self.before_bytes is None or self.after_bytes is None:
            return None
        return self.after_bytes - self.before_bytes

    @property
    def peak_above_start_bytes(self) -> int | None:
        """How far the peak rose above the memory in use when the cell started."""
        if self.peak_bytes is not None and self.before_bytes is not None:
            return max(0, self.peak_bytes - self.before_bytes)
        return self.peak.above_start_bytes if self.peak is not None else None

    @property
    def best_known_peak_bytes(self) -> int | None:
        """The cell's peak as best known: what to size a batch from.

        ``peak_bytes`` (allocated, exact) where it is known; otherwise, when the cell stayed
        below an earlier peak, the memory at the start plus the rise the allocator's trace
        measured (``before_bytes + peak_above_start_bytes``: a rise in requested bytes, which
        the allocator rounds up to 512 bytes or a whole cached block, so it can fall a little
        short of the allocated peak). ``None`` if neither is known (no trace; on CPU, a peak
        below the process's earlier one).
        """
        if self.peak_bytes is not None:
            return self.peak_bytes
        above = self.peak_above_start_bytes
        if self.before_bytes is None or above is None:
            return None
        return self.before_bytes + above
