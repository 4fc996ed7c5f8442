"""Text, HTML and figures of ``%memsummary`` and ``%%memsummary`` (the flow is magic.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jupyter_gpu.magics.output.render import (
    Cell,
    Table,
    fmt_bytes,
    fmt_signed_bytes,
    html_block,
    html_note,
    publish,
    publish_figure,
    show_note,
)
from jupyter_gpu.magics.shell.lazy_torch import torch_module

from .results import CellMemory, MemorySummary

if TYPE_CHECKING:
    from .oom import FreeReport
    from .tensors import TensorInfo


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _outputs_named(held: list[TensorInfo]) -> str:
    """``Out[4]``, ``Out[4] and Out[7]``... : the output entries that hold ``held``."""
    entries: list[str] = []
    for t in held:
        # Out[4][0] -> Out[4]; a traceback's name of the same tensor is not an entry.
        for name in (n for n in t.names if n.startswith("Out[")):
            entry = name[: name.index("]") + 1]
            if entry not in entries:
                entries.append(entry)
    shown = entries[:3] + ([f"{len(entries) - 3} more"] if len(entries) > 3 else [])
    if len(shown) < 2:
        return "".join(shown) or "Out[]"
    return ", ".join(shown[:-1]) + " and " + shown[-1]


def held_note(
    held_by_error: list[TensorInfo], held_by_outputs: list[TensorInfo], *, oom: bool, cuda: bool
) -> str | None:
    """What only the last error's traceback and only Out[] keep alive, each named as such.

    ``None`` when neither holds a tensor. The traceback is named only when there was an error
    (a traceback holds something); Out[] alone is IPython's output history, not an error.
    """
    parts = []
    if held_by_error:
        whose = (
            "The last cell ran out of memory; its traceback"
            if oom
            else "The last error's traceback"
        )
        parts.append(
            f"{whose} still holds {_count(len(held_by_error), 'tensor')}, "
            f"{fmt_bytes(sum(t.nbytes for t in held_by_error))} (a traceback keeps every "
            "frame's variables alive)"
        )
    if held_by_outputs:
        which = "Out[]" if held_by_error else "IPython's output history"
        parts.append(
            f"{which} still holds {_count(len(held_by_outputs), 'tensor')}, "
            f"{fmt_bytes(sum(t.nbytes for t in held_by_outputs))}, in "
            f"{_outputs_named(held_by_outputs)} (a cell's displayed value stays in Out[])"
        )
    if not parts:
        return None
    them = "it" if len(held_by_error) + len(held_by_outputs) == 1 else "them"
    empties = " and empties the CUDA cache" if cuda else ""
    return (
        f"{'; '.join(parts)}. %memsummary --free releases {them}{empties}; your own variables "
        "are kept."
    )


def show_summary(
    s: MemorySummary,
    index: int | None,
    held_by_error: list[TensorInfo],
    held_by_outputs: list[TensorInfo],
) -> None:
    """Display ``%memsummary``: allocator table, NVML's view, largest tensors, advice.

    ``held_by_error`` and ``held_by_outputs``: the tensors only the last error's traceback,
    and only Out[], keep alive (what ``--free`` would release).
    """
    parts_text: list[str] = []
    parts_html: list[str] = []

    def note(text: str, *, warn: bool = False) -> None:
        parts_text.append(text)
        parts_html.append(html_note(text, warn=warn))

    if index is None:
        note("No CUDA device in this kernel: the largest CPU tensors are listed instead.")
    else:
        torch_module()  # the UsageError that says how to install torch, where it is missing
        import torch

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
            note(
                nvml_gap_text(
                    s.nvml_used_bytes, s.reserved_bytes, s.context_bytes, s.context_reason
                )
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
            f"{fmt_bytes(s.unnamed_bytes)} of tensors is not reachable from any notebook name: "
            "held by libraries, closures, compiled graphs or CUDA graph pools, or left in "
            "reference cycles that Python's cycle collector has not freed yet (gc.collect() "
            "frees those; %memsummary --free runs it)."
        )
    held = held_note(
        held_by_error, held_by_outputs, oom=s.last_error_was_oom, cuda=index is not None
    )
    if held is not None:
        note(held, warn=bool(held_by_error))
    if s.last_error_was_oom and not held_by_error:
        note(
            "The last cell ran out of memory. Free memory by deleting large variables "
            "(del name), then torch.cuda.empty_cache(); or use a smaller batch, "
            "%amp on (bf16 halves activations), or activation checkpointing.",
            warn=True,
        )
    publish("\n".join(parts_text), html_block(parts_html))


def nvml_gap_text(
    used_bytes: int, reserved_bytes: int, context_bytes: int | None, context_reason: str | None
) -> str:
    """NVML's figure for this process beside torch's reserved, and what lies between them.

    The gap is what the process holds outside torch's caching allocator. cuBLAS's and cuBLASLt's
    workspaces are not in it: torch allocates them from that allocator
    (``aten/src/ATen/cuda/CublasHandlePool.cpp``: ``getNewWorkspace`` and
    ``getNewCUDABlasLtWorkspace`` call ``c10::cuda::CUDACachingAllocator::get()->allocate``,
    sized by ``CUBLAS_WORKSPACE_CONFIG`` and ``CUBLASLT_WORKSPACE_SIZE``), and so are cuDNN's
    convolution workspaces (``aten/src/ATen/native/cudnn/Conv_v7.cpp``, ``Conv_v8.cpp``); notebook
    00 measures the cuBLAS one inside ``allocated``. ``context_bytes`` is a bare context's size
    (``context.py``); ``None`` with ``context_reason`` when it was not measured.
    """
    gap = used_bytes - reserved_bytes
    text = (
        f"NVML: this process uses {fmt_bytes(used_bytes)} of GPU memory; torch reserved "
        f"{fmt_bytes(reserved_bytes)}. The {fmt_bytes(gap)} gap is memory outside torch's "
        "caching allocator: the CUDA context, the kernel images (modules) loaded so far, NCCL's "
        "own buffers and other libraries' own allocations. (cuBLAS's and cuDNN's workspaces are "
        "not in it: torch allocates them from its caching allocator, inside reserved.)"
    )
    if context_bytes is None:
        return f"{text} The context's own size was not measured: {context_reason}."
    text += (
        f" A bare CUDA context on this GPU takes {fmt_bytes(context_bytes)} (measured once in "
        "this kernel, by a fresh process that opened only a context)"
    )
    rest = gap - context_bytes
    if rest < 0:
        return f"{text}: more than the gap, so this process's context is the smaller one."
    return f"{text}; the other {fmt_bytes(rest)} are kernel images and libraries' own memory."


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
        if r.peak_bytes is not None:
            peak = f"the process peak rose to {fmt_bytes(r.peak_bytes)} in this cell"
        elif r.peak_before_bytes is not None:
            peak = (
                "peak: not above the process's earlier peak "
                f"({fmt_bytes(r.peak_before_bytes)}); torch keeps no CPU peak counter"
            )
        else:
            peak = "peak: not measured (no peak resident size read with the resident size here)"
        text = (
            f"cell memory (cpu, process resident memory): {fmt_bytes(r.before_bytes)} -> "
            f"{fmt_bytes(r.after_bytes)} ({fmt_signed_bytes(r.delta_bytes)}); {peak}"
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


def show_freed(report: FreeReport) -> None:
    """``%memsummary --free``: what it released and how much that freed, or that nothing held."""
    if report.cleared:
        text = (
            f"Released {', '.join(report.cleared)}: {report.tensors_freed} tensor(s) "
            f"collected, {fmt_bytes(report.freed_bytes)} freed"
        )
        if report.reserved_released_bytes:
            text += (
                f"; empty_cache() returned {fmt_bytes(report.reserved_released_bytes)} "
                "to the driver"
            )
        text += ". Your variables are untouched."
    else:
        text = "Nothing to free: no last error and no cached output holds a tensor."
    show_note(text)
