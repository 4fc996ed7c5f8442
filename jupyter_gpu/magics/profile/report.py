"""Text, HTML and the timeline figure for ``%profile``/``%%profile`` (the flow is magic.py)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from jupyter_gpu.magics.output.render import (
    Cell,
    Table,
    fmt_bytes,
    fmt_pct,
    html_block,
    html_note,
    publish,
    publish_figure,
    timeline_figure,
    timeline_svg,
)
from jupyter_gpu.magics.shell.lazy_torch import torch_module
from jupyter_gpu.measure import fmt_seconds

if TYPE_CHECKING:
    from .analysis import Analysis, RangeRow
    from .results import ProfileResult
    from .rows import OpRow

#: What a kernel row shows in the CPU columns: the GPU ran it, it has no CPU time.
NO_CPU_TIME = "\u2014"


def _sort_value(row: OpRow, key: str, cuda: bool) -> Any:
    if key == "memory":
        return row.self_gpu_mem_bytes if cuda else row.self_cpu_mem_bytes
    return getattr(row, key)


def _steps_text(r: ProfileResult) -> str:
    """The window every share is of (``idle.py``).

    ``2 steps (8.1 ms, steps 3 to 4)``; one measured run: ``the measured run (2.32 s)``, with
    its number after warm-up runs (``run 3``).
    """
    if r.steps > 1:
        return f"{r.steps} steps ({fmt_seconds(r.window_s)}, {r.window})"
    which = f", {r.window.replace('step', 'run')}" if r.steps and r.window != "step 1" else ""
    return f"the measured run ({fmt_seconds(r.window_s)}{which})"


def _syncs_note(r: ProfileResult, a: Analysis) -> str:
    """The measured steps' syncs, the time blocked in them, and where their lines came from.

    From the sync pass, from the profile's stacks, or the reason they were not looked for.
    """
    syncs = a.syncs
    if not syncs.count:
        return "Device syncs: none (the CPU never waited for the GPU in the measured steps)."
    text = (
        f"Device syncs: {syncs.describe()}; the CPU was blocked in them "
        f"{fmt_seconds(syncs.blocked_s)} of {fmt_seconds(r.window_s)}"
    )
    if syncs.places_from == "pass":
        text += " (lines from the sync pass: a run with sync-debug mode on, not profiled)"
    elif syncs.places_from == "stack":
        text += " (lines from the profile's Python stacks, --stack)"
    elif r.sync_note:
        text += f"; {r.sync_note}"
    return text + "."


def ranges_table(ranges: list[RangeRow], cuda: bool) -> Table:
    """The user's record_function ranges: spans of many ops and kernels, not ops."""
    headers = ["range", "calls", "CPU span"] + (["GPU span"] if cuda else [])
    table = Table(
        headers=headers,
        numeric=[False, True, True, True][: len(headers)],
        title=f"{len(ranges)} annotated range(s) (record_function; they hold the ops above)",
    )
    for rng in ranges[:10]:
        cells: list[Cell | str] = [
            rng.name[:80],
            Cell(str(rng.calls), rng.calls),
            Cell(fmt_seconds(rng.cpu_s), rng.cpu_s),
        ]
        if cuda:
            cells.append(Cell(fmt_seconds(rng.gpu_s) if rng.gpu_s else "-", rng.gpu_s))
        table.rows.append(cells)
    return table


def show_profile(r: ProfileResult, a: Analysis, *, cuda: bool, args: argparse.Namespace) -> None:
    """Display the table, the ranges, the notes and hints, and the timeline."""
    kernels_view = cuda and r.sort in ("self_gpu_s", "gpu_s")
    headers = ["kernel" if kernels_view else "op", "calls", "self CPU", "CPU total"]
    numeric = [False, True, True, True]
    if cuda:
        headers += ["self GPU", "GPU total"]
        numeric += [True, True]
    if args.memory:
        headers.append("self memory")
        numeric.append(True)
    if args.stack:
        headers.append("called from")
        numeric.append(False)
    reverse = r.sort != "name"
    # By GPU time, the table is the GPU's own work: kernels and copies, not the ops that
    # launched them (their GPU columns count the same kernels again); --sort self_cpu
    # lists the ops.
    kernels_only = cuda and r.sort in ("self_gpu_s", "gpu_s")
    listed = [row for row in r.rows if row.on_gpu] if kernels_only else r.rows
    what = "GPU kernels and copies" if kernels_only else "ops"
    rows = sorted(listed, key=lambda row: _sort_value(row, r.sort, cuda), reverse=reverse)
    table = Table(
        headers=headers,
        numeric=numeric,
        sortable=True,
        title=f"top {min(args.row_limit, len(rows))} of {len(rows)} {what}, by "
        f"{r.sort.removesuffix('_s').replace('_', ' ')}; {_steps_text(r)}"
        + ("; the ops that launched them: --sort self_cpu" if kernels_only else ""),
    )
    for row in rows[: args.row_limit]:
        cells: list[Cell | str] = [row.name[:80], Cell(str(row.calls), row.calls)]
        if row.on_gpu:  # a kernel or a copy: the GPU ran it, it has no CPU time
            cells += [Cell(NO_CPU_TIME, None), Cell(NO_CPU_TIME, None)]
        else:
            cells += [
                Cell(fmt_seconds(row.self_cpu_s), row.self_cpu_s),
                Cell(fmt_seconds(row.cpu_s), row.cpu_s),
            ]
        if cuda:
            cells += [
                Cell(fmt_seconds(row.self_gpu_s), row.self_gpu_s),
                Cell(fmt_seconds(row.gpu_s), row.gpu_s),
            ]
        if args.memory:
            mem = row.self_gpu_mem_bytes if cuda else row.self_cpu_mem_bytes
            cells.append(Cell(fmt_bytes(mem), mem))
        if args.stack:
            cells.append(row.called_from or "-")
        table.rows.append(cells)
    notes = []
    if cuda:
        idle = r.gpu_idle_fraction
        split = a.idle_split()
        notes.append(
            f"GPU idle {fmt_pct(idle)} of {_steps_text(r)} ({r.kernel_count:,} kernels)"
            + (f": {split}." if split else ".")
            if idle is not None
            else "GPU idle time: not measured."
        )
        notes.append(_syncs_note(r, a))
    else:
        notes.append("No CUDA GPU: CPU ops only.")
    if args.stack and not a.python_frames:
        notes.append(
            f"--stack: torch {torch_module().__version__} recorded no Python frames in "
            "this profile, so 'called from' is empty."
        )
    notes += [f"Hint: {h}" for h in r.hints]
    notes += [f"Note: {w}" for w in r.warmup_warnings]
    if r.warmup is not None:
        notes.append(
            f"Runs ({args.warmup} warm-up, {args.steps} measured, then the cell's own run, "
            f"not profiled): {r.warmup.line}"
        )
    if r.sync_pass is not None:
        notes.append(f"Sync pass (one more run, not profiled): {r.sync_pass.line}")
    if r.trace_file:
        notes.append(
            f"Trace written to {r.trace_file} (open in ui.perfetto.dev or chrome://tracing)."
        )
    tables = [table]
    if r.ranges:
        tables.append(ranges_table(r.ranges, cuda))
    publish(
        "\n\n".join(t.text() for t in tables) + "\n" + "\n".join(notes),
        html_block(
            [
                *(t.html() for t in tables),
                *(html_note(n, warn=n.startswith(("Hint", "Note"))) for n in notes),
            ]
        ),
    )
    if a.bars:
        lanes = len({b.lane for b in a.bars})
        summary = (
            f"timeline: {len(a.bars):,} events on {lanes} lane(s) over {fmt_seconds(a.window_s)}"
        )
        publish_figure(
            timeline_figure(a.bars, "Steps, CPU ops and GPU kernels over the measured steps"),
            timeline_svg(a.bars),
            summary,
        )
