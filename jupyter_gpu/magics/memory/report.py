"""Records and displays of ``%memsummary`` and ``%%memsummary`` (the magic is in memory.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jupyter_gpu.magics.common.lazy_torch import torch_module
from jupyter_gpu.magics.common.render import (
    Cell,
    Table,
    fmt_bytes,
    fmt_signed_bytes,
    html_block,
    html_note,
    publish,
    publish_figure,
)

from . import tensors as _tensors
from .timeline import MemoryTimeline

if TYPE_CHECKING:
    from jupyter_gpu.magics.common.peak import PeakReading


@dataclass
class MemorySummary:
    """What ``%memsummary -o`` returns (bytes; ``None`` where not measured, e.g. on CPU)."""

    device: str
    allocated_bytes: int | None
    reserved_bytes: int | None
    peak_bytes: int | None
    fragmentation_bytes: int | None
    alloc_retries: int | None
    ooms: int | None
    nvml_used_bytes: int | None
    nvml_reason: str | None
    tensors: list[_tensors.TensorInfo] = field(default_factory=list)
    unnamed_bytes: int = 0
    held_by_last_error_bytes: int = 0
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
    allocator's trace of the cell (``peak.source == "trace"``).
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
        return (
            f"<CellMemory {self.device}: {fmt_bytes(self.before_bytes)} -> "
            f"{fmt_bytes(self.after_bytes)}, peak {fmt_bytes(self.peak_bytes)}"
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


def show_summary(s: MemorySummary, index: int | None, held_count: int) -> None:
    """Display ``%memsummary``: allocator table, NVML's view, largest tensors, advice."""
    parts_text: list[str] = []
    parts_html: list[str] = []

    def note(text: str, *, warn: bool = False) -> None:
        parts_text.append(text)
        parts_html.append(html_note(text, warn=warn))

    if index is None:
        note("No CUDA device in this kernel: the largest CPU tensors are listed instead.")
    else:
        torch = torch_module()
        stats = Table(
            headers=["torch's caching allocator", "bytes", ""],
            numeric=[False, True, False],
            title=f"CUDA memory, device {index} ({torch.cuda.get_device_name(index)})",
        )
        stats.rows = [
            ["allocated (live tensors)", fmt_bytes(s.allocated_bytes), ""],
            ["reserved (held from the driver)", fmt_bytes(s.reserved_bytes), ""],
            ["peak allocated", fmt_bytes(s.peak_bytes), "since start or the last reset"],
            [
                "reserved - allocated",
                fmt_bytes(s.fragmentation_bytes),
                "cached or fragmented: usable by torch only",
            ],
            ["allocation retries", str(s.alloc_retries), "cache flushed to fit an allocation"],
            ["out-of-memory errors", str(s.ooms), ""],
        ]
        parts_text.append(stats.text())
        parts_html.append(stats.html())
        if s.nvml_used_bytes is not None and s.reserved_bytes is not None:
            gap = s.nvml_used_bytes - s.reserved_bytes
            note(
                f"NVML: this process uses {fmt_bytes(s.nvml_used_bytes)} of GPU memory; torch "
                f"reserved {fmt_bytes(s.reserved_bytes)}. The {fmt_bytes(gap)} gap is the "
                "CUDA context, cuBLAS/cuDNN/NCCL workspaces and other libraries."
            )
        else:
            note(f"NVML's view of this process: not available ({s.nvml_reason}).")
    if s.tensors:
        table = Table(
            headers=["size", "shape", "dtype", "held by"],
            numeric=[True, False, False, False],
            title=f"largest live tensors on {s.device} (views of one storage count once)",
        )
        for t in s.tensors:
            shape = "x".join(str(d) for d in t.shape) or "scalar"
            table.rows.append([Cell(fmt_bytes(t.nbytes), t.nbytes), shape, t.dtype, t.label])
        parts_text.append(table.text())
        parts_html.append(table.html())
    else:
        note(f"No live tensors on {s.device}.")
    if s.unnamed_bytes:
        note(
            f"{fmt_bytes(s.unnamed_bytes)} of tensors is not reachable from any notebook name "
            "(held by libraries, closures, compiled graphs or CUDA graph pools)."
        )
    if s.held_by_last_error_bytes > 0:
        what = (
            "The last cell ran out of memory; its traceback"
            if s.last_error_was_oom
            else "The last error's traceback"
        )
        note(
            f"{what} and Out[] still hold {held_count} tensor(s), "
            f"{fmt_bytes(s.held_by_last_error_bytes)} (a traceback keeps every frame's "
            "variables alive). %memsummary --free releases them and empties the CUDA cache; "
            "your own variables are kept.",
            warn=True,
        )
    elif s.last_error_was_oom:
        note(
            "The last cell ran out of memory. Free memory by deleting large variables "
            "(del name), then torch.cuda.empty_cache(); or use a smaller batch, "
            "%amp on (bf16 halves activations), or activation checkpointing.",
            warn=True,
        )
    publish("\n".join(parts_text), html_block(parts_html))


def _peak_text(r: CellMemory) -> str:
    """The peak, and how it was measured (torch's counter is never reset)."""
    above = fmt_signed_bytes(r.peak_above_start_bytes)
    reading = r.peak
    if r.peak_bytes is not None or reading is None:
        return f"peak {fmt_bytes(r.peak_bytes)} ({above} above the start)"
    earlier = fmt_bytes(reading.counter_before_bytes)
    if reading.requested_peak_bytes is not None:
        return (
            f"peak {fmt_bytes(reading.requested_peak_bytes)} requested ({above} above the "
            f"start; from the allocator's trace of the cell, before the allocator's rounding: "
            f"the cell stayed below the earlier peak of {earlier}, which "
            "torch.cuda.max_memory_allocated() still reads)"
        )
    return (
        f"peak: below the earlier peak of {earlier}, which torch.cuda.max_memory_allocated() "
        f"still reads (the cell's own peak was not measured: {reading.note})"
    )


def show_cell(r: CellMemory) -> None:
    """Display ``%%memsummary``: the delta and peak line, and the timeline if recorded."""
    if r.device == "cpu":
        text = (
            f"cell memory (cpu, process resident memory): {fmt_bytes(r.before_bytes)} -> "
            f"{fmt_bytes(r.after_bytes)} ({fmt_signed_bytes(r.delta_bytes)}); "
            + (
                f"the process peak rose to {fmt_bytes(r.peak_bytes)} in this cell"
                if r.peak_bytes is not None
                else "peak: not above the process's earlier peak "
                f"({fmt_bytes(r.peak_before_bytes)}); torch keeps no CPU peak counter"
            )
        )
    else:
        text = (
            f"cell memory ({r.device}, torch allocated): {fmt_bytes(r.before_bytes)} -> "
            f"{fmt_bytes(r.after_bytes)} ({fmt_signed_bytes(r.delta_bytes)}), "
            f"{_peak_text(r)}; reserved {fmt_bytes(r.reserved_after_bytes)}"
        )
    if r.failed:
        text = "the cell raised; " + text
    if r.out_of_memory:
        text += (
            ". It ran out of memory: its traceback keeps the failed step's tensors alive; "
            "%memsummary shows them, %memsummary --free releases them."
        )
    notes = [html_note(text, warn=r.failed)]
    if r.timeline_unavailable is not None:
        text += "\n" + r.timeline_unavailable
        notes.append(html_note(r.timeline_unavailable))
    publish(text, html_block(notes))
    if r.timeline is not None:
        from .timeline import alive_table, timeline_figure, timeline_svg

        summary = (
            f"memory timeline: {r.timeline.events:,} allocator events, peak "
            f"{fmt_bytes(r.timeline.peak_bytes)}"
        )
        publish_figure(timeline_figure(r.timeline), timeline_svg(r.timeline), summary)
        if r.timeline.alive_at_peak:
            table = alive_table(r.timeline)
            publish(table.text(), html_block([table.html()]))
