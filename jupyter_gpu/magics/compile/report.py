"""Text and HTML for ``%compile``'s reports (the flow is magic.py, the records results.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jupyter_gpu.magics.output.render import (
    Table,
    fmt_signed_bytes,
    html_block,
    html_note,
    html_pre,
    publish,
    show_note,
)
from jupyter_gpu.magics.shell.args import type_name
from jupyter_gpu.measure import fmt_seconds

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .dynamo_watch import CompileReport
    from .explain import Explanation
    from .results import BenchResult


def _backend_name(options: dict[str, Any]) -> str:
    backend = options.get("backend", "inductor")
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", "custom")
    mode = options.get("mode")
    return f"{name}, mode {mode}" if mode else name


def show_compiled(name: str, eager: Any, options: dict[str, Any]) -> None:
    """Say what ``%compile NAME`` did when it did not run anything yet."""
    reach = f"{name}._orig_mod" if hasattr(eager, "parameters") else "the result's .eager"
    flags = [f for f in ("fullgraph", "dynamic") if options.get(f)]
    text = (
        f"{name} is now torch.compile({type_name(eager)}) ({_backend_name(options)}"
        f"{', ' + ', '.join(flags) if flags else ''}). It compiles at its first call: the report "
        f"follows the cell that first calls it. The eager one: {reach}, or %compile {name} --undo."
    )
    show_note(text)


def report_lines(report: CompileReport, context: str) -> list[str]:
    """The report as plain-text lines (also used in the HTML, per line)."""
    span = "the first call" if context.startswith("at the first call") else "the cell"
    lines = [
        f"torch.compile {context}: {report.graphs} graph(s) from {report.frames} frame(s), "
        f"compile time {fmt_seconds(report.compile_time_s)} ({span} took "
        f"{fmt_seconds(report.wall_s)})"
    ]
    if report.graph_break_count or report.graph_breaks:
        lines.append(f"  graph breaks: {report.graph_break_count}")
        for gb in report.graph_breaks:
            count = f" (x{gb.count})" if gb.count > 1 else ""
            source = f" {gb.source}" if gb.source else ""
            lines.append(f"    {gb.where}:{source}{count}")
            lines.append(f"      {gb.reason}" + (f": {gb.explanation}" if gb.explanation else ""))
            if gb.url:
                lines.append(f"      {gb.url}")
    else:
        lines.append("  graph breaks: none")
    if report.recompiles:
        lines.append(f"  recompiles: {len(report.recompiles)}")
        for rc in report.recompiles[:5]:
            lines.append(f"    {rc.function}: {rc.reason.splitlines()[0][:160]}")
    for failure in report.failures[:3]:
        lines.append(f"  failed: {failure.splitlines()[0][:200]}")
    caches = ", ".join(
        f"{kind} {hits} hit(s) / {report.cache_misses.get(kind, 0)} miss(es)"
        for kind, hits in report.cache_hits.items()
    )
    if report.cache_bytes_added is not None:
        disk = f"; on disk {fmt_signed_bytes(report.cache_bytes_added)}"
    elif report.cache_pending:
        disk = "; on disk: being measured after the cell (a large cache), see .reports"
    else:
        disk = ""
    lines.append(f"  caches: {caches}{disk}")
    if report.cudagraph_skips:
        lines.append(f"  CUDA graphs skipped: {'; '.join(report.cudagraph_skips)}")
    return lines


def show_report(
    report: CompileReport, context: str, explanations: Sequence[Explanation] = ()
) -> None:
    """Display one compile report, with the causes it shows and their fixes."""
    lines = report_lines(report, context) + [f"Why: {e.text}" for e in explanations]
    parts = [html_note(lines[0])]
    if report.graph_breaks:
        table = Table(
            headers=["where", "source", "reason", "times"],
            numeric=[False, False, False, True],
            title=f"graph breaks ({report.graph_break_count})",
        )
        for gb in report.graph_breaks:
            reason = gb.reason + (f": {gb.explanation}" if gb.explanation else "")
            table.rows.append([gb.where, gb.source, reason, str(gb.count)])
        parts.append(table.html())
    rest = [
        line.strip()
        for line in lines[1:]
        if not line.startswith("    ") and not line.startswith("Why: ")
    ]
    rest = [
        line for line in rest if not line.startswith("graph breaks:") or not report.graph_breaks
    ]
    parts.append(html_pre("\n".join(rest)))
    parts += [html_note(f"Why: {e.text}", warn=True) for e in explanations]
    publish("\n".join(lines), html_block(parts))


#: Lines under a bench that ask for attention.
_WARN = ("Note", "Not steady", "Put back")


def show_bench(bench: BenchResult, explanations: Sequence[Explanation] = ()) -> None:
    """Display eager vs compiled time, the speedup, why it is no faster, and what was put back.

    ``explanations`` come from the table of causes (``causes/``): given only when
    compiled is slower or less than 10 % faster, and then never empty (at least "no cause
    found" with the figures).
    """
    ratio = bench.ratio
    verdict = ratio.describe() if ratio is not None else f"{bench.speedup:.2f}x"
    text = (
        f"bench {bench.expr}: eager {fmt_seconds(bench.eager_s)}, compiled "
        f"{fmt_seconds(bench.compiled_s)} a call -> compiled {verdict}"
    )
    if bench.method:
        text += f"\n  ({bench.method})"
    unsteady = [f"Not steady: {n}." for n in bench.machine.notes]
    why = [f"Why: {e.text}" for e in explanations]
    notes = [*unsteady, *(f"Note: {w}" for w in bench.warnings)]
    if bench.restored is not None:
        notes.append(bench.restored.line)
    publish(
        "\n".join([text, *why, *notes]),
        html_block(
            [
                html_note(text, warn=ratio is not None and ratio.slower),
                *(html_note(w, warn=True) for w in why),
                *(html_note(n, warn=n.startswith(_WARN)) for n in notes),
            ]
        ),
    )
