"""``%memsummary`` / ``%%memsummary``: this kernel's GPU memory, what holds it, a cell's peak."""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import dataclass, field
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import line_cell_magic, magics_class, needs_local_scope

from . import _tensors
from ._allocator import AllocatorStats, NvmlProcessView, nvml_process_view, process_rss_bytes
from ._args import ShellMagics, argument, magic_arguments, non_negative_int, parse, positive_int
from ._cell import CellCode, cell_filenames
from ._oom import FreeReport, free_references, last_error_was_oom
from ._render import (
    Cell,
    Table,
    fmt_bytes,
    fmt_signed_bytes,
    html_block,
    html_note,
    publish,
    publish_figure,
)
from ._torch import cuda_device_index, torch_module
from .memory_timeline import MemoryTimeline


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
    ``peak_before_bytes`` is the peak counter as it was before the cell reset it.
    """

    device: str
    before_bytes: int | None
    after_bytes: int | None
    peak_bytes: int | None
    peak_before_bytes: int | None
    reserved_before_bytes: int | None = None
    reserved_after_bytes: int | None = None
    timeline: MemoryTimeline | None = None
    value: Any = None
    failed: bool = False
    out_of_memory: bool = False

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
        if self.peak_bytes is None or self.before_bytes is None:
            return None
        return max(0, self.peak_bytes - self.before_bytes)


@magics_class
class MemoryMagics(ShellMagics):
    """``%memsummary`` and ``%%memsummary``."""

    @magic_arguments()
    @argument("-d", "--device", type=non_negative_int, help="CUDA device index (default: current)")
    @argument("-n", "--top", type=positive_int, default=10, help="largest tensors to list (10)")
    @argument("--free", action="store_true", help="free what the last error and Out[] hold")
    @argument(
        "--snapshot", action="store_true", help="cell: record and draw the allocation history"
    )
    @argument("--max-entries", type=positive_int, default=100_000, help="cell: history length")
    @argument("-o", "--output", action="store_true", help="return a result object")
    @argument("-q", "--quiet", action="store_true", help="print nothing")
    @needs_local_scope
    @line_cell_magic
    def memsummary(
        self, line: str, cell: str | None = None, local_ns: dict[str, Any] | None = None
    ) -> Any:
        """GPU memory of this kernel: allocator figures, NVML's view, largest tensors by name.

        %memsummary [-d N] [-n TOP]  allocated, reserved, peak, reserved minus allocated,
        allocation retries and OOMs; NVML's view of this process next to torch's; the TOP
        largest live tensors with the notebook names that hold them.
        %memsummary --free  after an out-of-memory error: drop the last traceback and the
        Out[] entries that hold tensors, collect garbage, empty the CUDA cache; report it.
        %%memsummary [--snapshot]  run the cell, show its before/after delta and its peak;
        --snapshot also draws the allocation timeline over the cell and what was alive at
        the peak (CUDA only).
        """
        args = parse(MemoryMagics.memsummary, line)
        if cell is not None:
            if args.free:
                raise UsageError(
                    "--free is for %memsummary on a line of its own, not %%memsummary."
                )
            return self._cell(args, cell, local_ns)
        if args.snapshot:
            raise UsageError(
                "--snapshot records the history of a cell: put %%memsummary --snapshot at the "
                "top of the cell to record."
            )
        if args.free:
            return self._free(args)
        return self._summary(args)

    # -------------------------------------------------------------------------- device

    @staticmethod
    def _device(args: argparse.Namespace) -> tuple[str, int | None]:
        torch = torch_module()
        if not torch.cuda.is_available():
            if args.device is not None:
                raise UsageError(f"-d {args.device}: torch sees no CUDA device in this kernel.")
            return "cpu", None
        index = cuda_device_index(args.device)
        return f"cuda:{index}", index

    # -------------------------------------------------------------------------- line

    def _summary(self, args: argparse.Namespace) -> MemorySummary | None:
        device, index = self._device(args)
        census = _tensors.census(self.shell, device)
        held = census.bytes_from(_tensors.OUTPUT) - census.unnamed_bytes
        oom = last_error_was_oom()
        if index is None:
            summary = MemorySummary(device, None, None, None, None, None, None, None, "no CUDA")
        else:
            stats = AllocatorStats.read(index)
            nvml = (
                nvml_process_view(index)
                if stats.initialized
                else NvmlProcessView(None, None, None, "this kernel has not used CUDA yet")
            )
            summary = MemorySummary(
                device,
                stats.allocated_bytes,
                stats.reserved_bytes,
                stats.peak_bytes,
                stats.fragmentation_bytes,
                stats.alloc_retries,
                stats.ooms,
                nvml.used_bytes,
                nvml.reason,
            )
        summary.tensors = census.largest(args.top)
        summary.unnamed_bytes = census.unnamed_bytes
        summary.held_by_last_error_bytes = held
        summary.last_error_was_oom = oom
        if not args.quiet:
            self._show_summary(summary, index, census.count_from(_tensors.OUTPUT))
        return summary if args.output else None

    def _show_summary(self, s: MemorySummary, index: int | None, held_count: int) -> None:
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

    def _free(self, args: argparse.Namespace) -> FreeReport | None:
        if args.device is not None or args.top != 10:
            raise UsageError("--free takes no -d or -n: it frees references on every device.")
        report = free_references(self.shell)
        if not args.quiet:
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
            publish(text, html_block([html_note(text)]))
        return report if args.output else None

    # -------------------------------------------------------------------------- cell

    def _cell(self, args: argparse.Namespace, cell: str, local_ns: Any) -> Any:
        if args.top != 10:
            raise UsageError("-n belongs to %memsummary on a line of its own.")
        device, index = self._device(args)
        if args.snapshot and index is None:
            raise UsageError(
                "--snapshot records the CUDA caching allocator's history: it needs a CUDA device."
                " On CPU, %%profile --memory shows allocations per op."
            )
        code = CellCode(self.shell, cell)
        if index is None:
            return self._cell_cpu(args, code, local_ns)
        return self._cell_cuda(args, code, local_ns, device, index)

    def _cell_cpu(self, args: argparse.Namespace, code: CellCode, local_ns: Any) -> Any:
        rss_before, max_before = process_rss_bytes()
        result = CellMemory("cpu", rss_before, None, None, max_before)
        try:
            result.value = code.run(local_ns)
        except BaseException as exc:
            result.failed = True
            result.out_of_memory = _is_oom(exc)
            raise
        finally:
            result.after_bytes, max_after = process_rss_bytes()
            # The lifetime peak RSS only tells the cell's peak if the cell raised it.
            if max_after is not None and max_before is not None and max_after > max_before:
                result.peak_bytes = max_after
            if not args.quiet:
                with _never_masking():
                    self._show_cell(result)
        return result if args.output else result.value

    def _cell_cuda(
        self, args: argparse.Namespace, code: CellCode, local_ns: Any, device: str, index: int
    ) -> Any:
        torch = torch_module()
        before = AllocatorStats.read(index)
        if before.initialized:
            torch.cuda.reset_peak_memory_stats(index)
        result = CellMemory(
            device,
            before.allocated_bytes,
            None,
            None,
            before.peak_bytes if before.initialized else None,
            reserved_before_bytes=before.reserved_bytes,
        )
        snapshot: dict[str, Any] | None = None
        try:
            if args.snapshot:
                from .memory_timeline import recording

                with torch.cuda.device(index), recording(args.max_entries):
                    try:
                        result.value = code.run(local_ns)
                    finally:
                        snapshot = torch.cuda.memory._snapshot()
            else:
                result.value = code.run(local_ns)
        except BaseException as exc:
            result.failed = True
            result.out_of_memory = _is_oom(exc)
            raise
        finally:
            after = AllocatorStats.read(index)
            result.after_bytes = after.allocated_bytes
            result.reserved_after_bytes = after.reserved_bytes
            result.peak_bytes = after.peak_bytes
            if snapshot is not None:
                from .memory_timeline import build_timeline

                with _never_masking():
                    result.timeline = build_timeline(
                        snapshot,
                        index,
                        before.allocated_bytes,
                        before.reserved_bytes,
                        cell_filenames(self.shell),
                    )
            if not args.quiet:
                with _never_masking():
                    self._show_cell(result)
        return result if args.output else result.value

    def _show_cell(self, r: CellMemory) -> None:
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
                f"{fmt_bytes(r.after_bytes)} ({fmt_signed_bytes(r.delta_bytes)}), peak "
                f"{fmt_bytes(r.peak_bytes)} ({fmt_signed_bytes(r.peak_above_start_bytes)} above "
                f"the start); reserved {fmt_bytes(r.reserved_after_bytes)}"
            )
        if r.failed:
            text = "the cell raised; " + text
        if r.out_of_memory:
            text += (
                ". It ran out of memory: its traceback keeps the failed step's tensors alive; "
                "%memsummary shows them, %memsummary --free releases them."
            )
        publish(text, html_block([html_note(text, warn=r.failed)]))
        if r.timeline is not None:
            from .memory_timeline import alive_table, timeline_figure, timeline_svg

            summary = (
                f"memory timeline: {r.timeline.events:,} allocator events, peak "
                f"{fmt_bytes(r.timeline.peak_bytes)}"
            )
            publish_figure(timeline_figure(r.timeline), timeline_svg(r.timeline), summary)
            if r.timeline.alive_at_peak:
                table = alive_table(r.timeline)
                publish(table.text(), html_block([table.html()]))


def _is_oom(exc: BaseException) -> bool:
    torch = torch_module()
    oom = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    return isinstance(exc, oom)


@contextlib.contextmanager
def _never_masking() -> Any:
    """Report problems in the report itself without hiding the cell's own error."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001  # a broken report must not replace the cell's error
        print(f"(jupyter-gpu: the memory report failed: {type(exc).__name__}: {exc})")  # noqa: T201
