"""``%memsummary`` / ``%%memsummary``: this kernel's GPU memory, what holds it, a cell's peak."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import line_cell_magic, magics_class, needs_local_scope

from jupyter_gpu.magics.probes.allocator import AllocatorStats, NvmlProcessView, nvml_process_view
from jupyter_gpu.magics.probes.peak import PeakWatch
from jupyter_gpu.magics.probes.process_memory import read_process_memory
from jupyter_gpu.magics.shell.args import (
    ShellMagics,
    argument,
    magic_arguments,
    non_negative_int,
    output_options,
    parse,
    positive_int,
)
from jupyter_gpu.magics.shell.cell import CellCode, cell_filenames
from jupyter_gpu.magics.shell.lazy_torch import cuda_device_index, torch_module

from . import tensors as _tensors
from .context import context_footprint
from .oom import FreeReport, free_references, is_oom, last_error_was_oom
from .report import show_cell, show_freed, show_summary
from .results import CellMemory, MemorySummary

__all__ = ["CellMemory", "MemoryMagics", "MemorySummary"]

NO_CUDA_TIMELINE = (
    "No allocation timeline: --snapshot records the CUDA caching allocator's history and needs "
    "a CUDA GPU, which torch does not see in this kernel (%%profile --memory shows CPU "
    "allocations per op)."
)


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
    @output_options()
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
        %%memsummary [--snapshot]  run the cell, show its before/after delta and its peak
        (torch's peak counter is never reset: torch.cuda.max_memory_allocated() reads after
        the cell what it would have read without the magic);
        --snapshot also draws the allocation timeline over the cell and what was alive at
        the peak (CUDA only: without a GPU the cell runs with the CPU report and a note).
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
        torch_module()  # the UsageError that says how to install torch, where it is missing
        import torch

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
        # What --free would release: tensors only Out[] or the last traceback name, each
        # counted under the best name it has (Out[] before a traceback).
        held_by_outputs = census.held_only_by(_tensors.OUTPUT)
        held_by_error = census.held_only_by(_tensors.TRACEBACK)
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
            if nvml.used_bytes is not None:  # the gap is shown: measure its first part
                context = context_footprint(index)
                summary.context_bytes, summary.context_reason = context.used_bytes, context.reason
        summary.tensors = census.largest(args.top)
        summary.unnamed_bytes = census.unnamed_bytes
        summary.held_by_last_error_bytes = sum(t.nbytes for t in held_by_error)
        summary.held_by_outputs_bytes = sum(t.nbytes for t in held_by_outputs)
        summary.last_error_was_oom = oom
        if not args.quiet:
            show_summary(summary, index, held_by_error, held_by_outputs)
        return summary if args.output else None

    def _free(self, args: argparse.Namespace) -> FreeReport | None:
        if args.device is not None or args.top != 10:
            raise UsageError("--free takes no -d or -n: it frees references on every device.")
        report = free_references(self.shell)
        if not args.quiet:
            show_freed(report)
        return report if args.output else None

    # -------------------------------------------------------------------------- cell

    def _cell(self, args: argparse.Namespace, cell: str, local_ns: Any) -> Any:
        if args.top != 10:
            raise UsageError("-n belongs to %memsummary on a line of its own.")
        device, index = self._device(args)
        code = CellCode(self.shell, cell)
        if index is None:
            # A notebook meant for CPU and GPU machines may keep --snapshot: the cell still
            # runs, with the CPU report and a line saying why there is no timeline.
            return self._cell_cpu(args, code, local_ns)
        return self._cell_cuda(args, code, local_ns, device, index)

    def _cell_cpu(self, args: argparse.Namespace, code: CellCode, local_ns: Any) -> Any:
        before = read_process_memory()
        result = CellMemory("cpu", before.rss_bytes, None, None, before.peak_bytes)
        if args.snapshot:
            result.timeline_unavailable = NO_CUDA_TIMELINE
        try:
            with _failure_marked(result):
                result.value = code.run(local_ns)
        finally:
            after = read_process_memory()
            result.after_bytes = after.rss_bytes
            # The lifetime peak tells the cell's peak only if the cell raised it; each peak is
            # read with its resident size (never below it), so it is at least the start and
            # the end. Without a peak after the cell there is nothing to compare: not measured.
            if after.peak_bytes is None:
                result.peak_before_bytes = None
            elif before.peak_bytes is not None and after.peak_bytes > before.peak_bytes:
                result.peak_bytes = after.peak_bytes
            if not args.quiet:
                with _never_masking():
                    show_cell(result)
        return result if args.output else result.value

    def _cell_cuda(
        self, args: argparse.Namespace, code: CellCode, local_ns: Any, device: str, index: int
    ) -> Any:
        """Run the cell and measure its peak without resetting torch's peak counter.

        ``torch.cuda.reset_peak_memory_stats`` cannot be undone (torch has no way to set the
        counter back), so the cell's peak comes from probes/peak.py: the counter itself when
        the cell went above the earlier peak, else the allocator's trace of the cell.
        """
        torch_module()  # the UsageError that says how to install torch, where it is missing
        import torch

        before = AllocatorStats.read(index)
        # With --snapshot the timeline's own recording is the trace.
        watch = PeakWatch(index, trace=not args.snapshot) if before.initialized else None
        result = CellMemory(
            device,
            before.allocated_bytes,
            None,
            None,
            before.peak_bytes if before.initialized else None,
            reserved_before_bytes=before.reserved_bytes,
        )
        snapshot: dict[str, Any] | None = None
        ours = False
        if watch is not None:
            watch.start()
        try:
            with _failure_marked(result):
                if args.snapshot:
                    from .timeline import recording

                    with torch.cuda.device(index), recording(args.max_entries) as ours:
                        try:
                            result.value = code.run(local_ns)
                        finally:
                            snapshot = torch.cuda.memory._snapshot()
                else:
                    result.value = code.run(local_ns)
        finally:
            reading = (
                watch.stop(snapshot if ours else None, args.max_entries)
                if watch is not None
                else None
            )
            after = AllocatorStats.read(index)
            result.after_bytes = after.allocated_bytes
            result.reserved_after_bytes = after.reserved_bytes
            result.peak = reading
            # CUDA started in this cell: the counter began at zero, so it is the cell's peak.
            result.peak_bytes = after.peak_bytes if reading is None else reading.peak_bytes
            if snapshot is not None:
                from .timeline import build_timeline

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
                    show_cell(result)
        return result if args.output else result.value


@contextlib.contextmanager
def _failure_marked(result: CellMemory) -> Iterator[None]:
    """The cell's exception marks ``result`` (failed; out of memory or not) and goes on up."""
    try:
        yield
    except BaseException as exc:
        result.failed = True
        result.out_of_memory = is_oom(exc)
        raise


@contextlib.contextmanager
def _never_masking() -> Any:
    """Report problems in the report itself without hiding the cell's own error."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001  # a broken report must not replace the cell's error
        message = f"(jupyter-gpu: the memory report failed: {type(exc).__name__}: {exc})"
        print(message)  # noqa: T201 (the cell's output, where the report would have been)
