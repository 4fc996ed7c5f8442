"""The report of ``%tune``: the step as it was, the ranked fixes, the stack, the code, the rest.

Text for a terminal, HTML for a notebook, and a plotly waterfall of the stack (plotly's own
mimetype, drawn without a CDN; a small SVG as its HTML fallback), as the other magics do.
"""

from __future__ import annotations

import html
from typing import Any

from jupyter_gpu.magics.output.render import (
    Cell,
    Table,
    fmt_bytes,
    fmt_pct,
    html_block,
    html_note,
    html_pre,
    publish,
    publish_figure,
)
from jupyter_gpu.magics.profile.cupti import cupti_torn_down
from jupyter_gpu.magics.shell.lazy_torch import describe_device
from jupyter_gpu.measure import fmt_ratio, fmt_seconds
from jupyter_gpu.measure.digits import three_digits

from . import mfu
from .budget import describe_s
from .results import DEFAULT_SOURCE, StackResult, StepProfile, TuneResult
from .trial import LOSS_RTOL, memory_text

METHOD = (
    "How each speedup was measured: each fix, in the order tried, on top of the fixes kept "
    "before it (the 'on top of' column; none kept yet: the step as it is): the kept fixes "
    "without it and with it, timed in interleaved rounds (blocks of calls, the order alternating; "
    "CUDA events on a GPU, perf_counter on a CPU); the median of the rounds' paired ratios, with "
    "its interval (95 % asked, the level reached printed; taken over stretches of consecutive "
    "rounds, so that a drifting machine widens it); 'no measurable difference' when the "
    "interval holds 1.0. Each fix starts from the same state as the step as it was: the loss "
    "after one update is compared with the "
    f"original's (kept only within {LOSS_RTOL:.0%}), and on CUDA the first step's allocator peak "
    "with the kept fixes' (the memory it adds). The compile modes are each timed on top of the "
    "kept others, none on top of another; a larger batch is never kept. The kept fixes together "
    "are timed against the step as it is."
)
#: Under the method, on a GPU after %tune's profile of the step (docs/magics.md, "What a profile
#: leaves in the kernel", has what an attached CUPTI measured on two steps).
AFTER_PROFILE = (
    "On this GPU every fix was timed after %tune's profile of the step, and Kineto (the "
    "profiler's library) keeps CUPTI attached to the kernel's process after a profile unless "
    "TEARDOWN_CUPTI=1 is set: that costs CPU time on each kernel launch, so a fix that "
    "launches fewer kernels can gain more here than in a process that never profiled (see "
    "'What a profile leaves in the kernel' in jupyter-gpu's docs/magics.md)."
)
#: The line under the table.
ON_TOP = (
    "Each fix was timed on top of the fixes kept before it, in the order tried ('on top of'): "
    "its speedup is what it adds to them"
)


def fixes_table(result: TuneResult) -> Table:
    """One row per fix tried, best first."""
    # The level the rounds reached (95 % asked; 12 stretches of rounds reach 96 %), not the one
    # asked: fewer rounds reach less.
    levels = sorted({round(f.ratio.level * 100) for f in result.fixes if f.ratio is not None})
    level = f"{levels[0]}" if len(levels) == 1 else f"{levels[0]}-{levels[-1]}" if levels else "95"
    table = Table(
        headers=[
            "#",
            "fix",
            "speedup",
            f"{level} % interval",
            "memory",
            "loss change",
            "kept",
            "on top of",
        ],
        numeric=[True, False, True, True, True, True, False, False],
        title=f"%tune {result.expr}: the fixes tried, best first",
    )
    for rank, fix in enumerate(result.fixes, 1):
        if fix.speedup is None or fix.interval is None:
            table.rows.append(
                [str(rank), fix.name, "failed", "", "", "", fix.verdict[:80], fix.baseline()]
            )
            continue
        low, high = fix.interval
        loss = "n/a" if fix.loss_delta is None else f"{fix.loss_delta:+.3g}"
        table.rows.append(
            [
                str(rank),
                fix.name,
                Cell(f"{fmt_ratio(fix.speedup)}x", fix.speedup),
                Cell(f"{fmt_ratio(low)}-{fmt_ratio(high)}x", low),
                Cell(memory_text(fix.memory_delta_bytes), fix.memory_delta_bytes),
                Cell(loss, fix.loss_delta),
                "yes" if fix.stacked else fix.verdict.removeprefix("not kept: "),
                fix.baseline(),
            ]
        )
    return table


def profile_lines(p: StepProfile, device: str) -> list[str]:
    """What the step as it was measured, a line each."""
    lines = [f"the step as it is: {p.describe()}"]
    where = []
    if p.gpu_idle_fraction is not None:
        split = f" ({p.idle_split})" if p.idle_split else ""
        where.append(f"GPU idle {fmt_pct(p.gpu_idle_fraction)}{split}")
    if p.loader_share > 0:
        where.append(f"DataLoader {fmt_pct(p.loader_share)}")
    if p.sync_count:
        where.append(f"{p.sync_count} device sync(s), blocked {fmt_pct(p.sync_share)}")
    if where:
        lines.append(f"over {p.steps_profiled} profiled steps: " + "; ".join(where))
    if p.top_ops:
        what = "kernels" if device == "cuda" else "CPU ops (self time)"
        tops = ", ".join(f"{name[:50]} {fmt_seconds(s)}" for name, s in p.top_ops)
        lines.append(f"top {what} a profiled step (the profiler slows the ops it records): {tops}")
    if p.peak_bytes is not None:
        free = f", {fmt_bytes(p.free_bytes)} free" if p.free_bytes is not None else ""
        lines.append(f"the first step's peak: {fmt_bytes(p.peak_bytes)} above its start{free}")
    if p.flops_per_step:
        lines.append(
            f"model FLOPs: {p.flops_per_step / 1e9:.3g} GFLOP a step ({p.flops_note}); "
            + mfu.describe(p.mfu_before, "as counted above")
        )
    return lines


def stack_line(stack: StackResult, p: StepProfile | None) -> str:
    """The kept fixes together: the measured speedup beside the product of the parts' gains."""
    names = " + ".join(stack.names)
    if stack.ratio is None:
        return f"the kept fixes together ({names}) failed: {stack.error}"
    if len(stack.names) == 1:
        head = f"one fix kept ({names}): {stack.ratio.describe()}"
    else:
        head = (
            f"the kept fixes together ({names}), against the step as it is: "
            f"{stack.ratio.describe()}, beside {fmt_ratio(stack.product)}x, the product of their "
            "speedups, each timed on top of the ones kept before it"
        )
    both = mfu.before_after(p.mfu_before, p.mfu_after) if p is not None else None
    if both is not None:
        head += f"; {both}"
    return head


def waterfall(result: TuneResult) -> tuple[dict[str, Any], str] | None:
    """The plotly waterfall of the stack (ms per step) and its SVG fallback, or ``None``."""
    p, stack = result.profile, result.stack
    if p is None or stack is None or stack.ratio is None:
        return None
    # In the order they were kept: each one's gain was timed on top of the bars before it.
    by_name = {f.name: f for f in result.fixes}
    kept = [by_name[n] for n in stack.names if n in by_name and by_name[n].speedup]
    base_ms = p.step_s * 1e3
    x, y, measure, text = ["as it is"], [base_ms], ["absolute"], [f"{three_digits(base_ms)} ms"]
    now = base_ms
    for fix in kept:
        speedup = fix.speedup or 1.0  # kept holds only fixes with a speedup
        after = now / speedup
        x.append(fix.name)
        y.append(after - now)
        measure.append("relative")
        text.append(f"{fmt_ratio(speedup)}x")
        now = after
    together = base_ms / stack.ratio.value
    x.append("together (measured)")
    y.append(together)
    measure.append("absolute")
    text.append(f"{three_digits(together)} ms, {fmt_ratio(stack.ratio.value)}x")
    figure = {
        "data": [
            {
                "type": "waterfall",
                "x": x,
                "y": [round(v, 6) for v in y],
                "measure": measure,
                "text": text,
                "textposition": "outside",
                "connector": {"line": {"color": "#999"}},
                # A step that gets shorter is good news: green (plotly draws decreases red).
                "decreasing": {"marker": {"color": "#2ca02c"}},
                "increasing": {"marker": {"color": "#d62728"}},
                "totals": {"marker": {"color": "#1f77b4"}},
            }
        ],
        "layout": {
            "title": {
                "text": "Step time: each kept fix's gain over the ones kept before it, in "
                "turn, then all of them measured"
            },
            "yaxis": {"title": {"text": "ms per step"}, "rangemode": "tozero"},
            "height": 360,
            "margin": {"l": 60, "r": 20, "t": 50, "b": 80},
            "showlegend": False,
        },
        "config": {"displaylogo": False},
    }
    return figure, _waterfall_svg(x, y, measure)


def _waterfall_svg(x: list[str], y: list[float], measure: list[str]) -> str:
    """A small static sketch of the waterfall for the HTML fallback."""
    levels: list[tuple[float, float]] = []
    now = 0.0
    for value, kind in zip(y, measure, strict=True):
        if kind == "absolute":
            levels.append((0.0, value))
            now = value
        else:
            levels.append((now + value, now))
            now += value
    top = max(max(a, b) for a, b in levels) or 1.0
    width, height, bar = 720, 200, 720 // max(1, len(x))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 30}">']
    for i, ((low, high), label) in enumerate(zip(levels, x, strict=True)):
        y0 = height - max(low, high) / top * height
        h = max(1.0, abs(high - low) / top * height)
        colour = "#1f77b4" if measure[i] == "absolute" else "#2ca02c"
        parts.append(
            f'<rect x="{i * bar + 4}" y="{y0:.1f}" width="{bar - 8}" height="{h:.1f}" '
            f'fill="{colour}"><title>{html.escape(label)}</title></rect>'
            f'<text x="{i * bar + 4}" y="{height + 14}" font-size="10">'
            f"{html.escape(label[:18])}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def over_budget_line(result: TuneResult) -> str | None:
    """Where a run over its budget spent its time: its longest stages, as measured, or None.

    A stage is begun only where its estimate fits in what is left, and one under way is
    finished (a compile cannot be stopped halfway), so an overrun is an estimate missed; this
    names which, each beside what was estimated for it.
    """
    over = result.elapsed_s - result.budget_s
    if over < 1.0 or result.budget_s <= 0:
        return None
    longest = sorted(result.stages, key=lambda stage: -stage[1])[:3]
    rest = result.elapsed_s - sum(seconds for _, seconds in result.stages)

    def told(label: str, seconds: float) -> str:
        expected = result.estimates.get(label)
        if expected is None:
            return f"{label} {describe_s(seconds)}"
        return f"{label} {describe_s(seconds)} (estimated {describe_s(expected)})"

    named = ", ".join(told(label, seconds) for label, seconds in longest)
    where = f"; the longest stages: {named}" if longest else ""
    others = f", {len(result.stages) - len(longest)} more" if len(result.stages) > 3 else ""
    between = describe_s(max(0.0, rest))
    return (
        f"Over the budget by {describe_s(over)}: a stage under way is finished, not cut "
        f"short{where}{others}; between the stages (the plan, putting things back) {between}"
    )


def method_lines(result: TuneResult) -> list[str]:
    """How the speedups were measured; on a GPU, that the trials came after a profile."""
    lines = [METHOD]
    if result.device == "cuda" and result.profile is not None and not cupti_torn_down():
        lines.append(AFTER_PROFILE)
    return lines


def show_report(result: TuneResult) -> None:
    """Display the whole report (text and HTML), then the waterfall."""
    text: list[str] = []
    parts: list[str] = []
    head = (
        f"%tune {result.expr} on {describe_device(result.device)}, in "
        f"{describe_s(result.elapsed_s)} of a {describe_s(result.budget_s)} budget"
    )
    text.append(head)
    parts.append(f"<p><b>{html.escape(head)}</b></p>")
    over = over_budget_line(result)
    if over is not None:
        text.append(over)
        parts.append(html_note(over, warn=True))
    if result.interrupted:
        note = "Stopped by Ctrl-C: everything was put back; below is what was measured before."
        text.append(note)
        parts.append(html_note(note, warn=True))
    if result.profile is not None:
        lines = profile_lines(result.profile, result.device)
        text += lines
        parts += [html_note(line) for line in lines]
    if result.fixes:
        table = fixes_table(result)
        text += [table.text(), ON_TOP]
        parts += [table.html(), html_note(ON_TOP)]
        for fix in result.fixes:
            source = [] if fix.source in ("", DEFAULT_SOURCE) else [f"the figure: {fix.source}"]
            for line in (*source, *fix.notes):
                text.append(f"  {fix.name}: {line}")
                parts.append(html_note(f"{fix.name}: {line}"))
            if fix.loss_note and fix.kept:
                text.append(f"  {fix.name}: loss {fix.loss_note}")
                parts.append(html_note(f"{fix.name}: loss {fix.loss_note}"))
    if result.stack is not None:
        line = stack_line(result.stack, result.profile)
        text.append(line)
        parts.append(f"<p><b>{html.escape(line)}</b></p>")
        for note in result.stack.notes:
            text.append(f"  {note}")
            parts.append(html_note(note, warn=True))
    elif result.fixes:
        line = "no fix was kept: none was measurably faster with the loss within tolerance"
        text.append(line)
        parts.append(html_note(line))
    if result.code:
        text += ["the code to paste (a cell):", result.code]
        parts += [html_note("the code to paste (a cell):"), html_pre(result.code)]
    for line in result.applied:
        text.append(line)
        parts.append(html_note(line))
    if result.not_tried:
        text.append("not tried:")
        parts.append(html_note("not tried:"))
        for item in result.not_tried:
            gpu = (
                " (needs a GPU)"
                if item.needs_gpu and result.device != "cuda" and "GPU" not in item.why
                else ""
            )
            line = f"  {item.name}: {item.why}{gpu}"
            text.append(line)
            parts.append(html_note(line.strip()))
        spent = [item.name for item in result.not_tried if item.reason == "budget"]
        if spent:
            line = (
                f"  {len(spent)} not reached in the {describe_s(result.budget_s)} budget "
                f"({', '.join(spent)}): run %tune again with a longer --budget to try "
                f"{'it' if len(spent) == 1 else 'them'}"
            )
            text.append(line)
            parts.append(html_note(line.strip(), warn=True))
    if result.suggestions:
        text.append("suggested (these need the code changed; not applied):")
        parts.append(html_note("suggested (these need the code changed; not applied):"))
        for s in result.suggestions:
            line = f"  {s.name}: {s.text}" + (f" [{s.where}]" if s.where else "")
            text.append(line)
            parts.append(html_note(line.strip()))
    if result.restored is not None:
        text.append(result.restored.line)
        parts.append(html_note(result.restored.line))
    for line in method_lines(result):
        text.append(line)
        parts.append(html_note(line))
    publish("\n".join(text), html_block(parts))
    drawn = waterfall(result)
    if drawn is not None:
        figure, svg = drawn
        stack = result.stack
        assert stack is not None
        assert stack.ratio is not None
        publish_figure(
            figure,
            svg,
            f"waterfall: {fmt_seconds(result.profile.step_s if result.profile else None)} a step "
            f"as it was, {fmt_ratio(stack.ratio.value)}x faster with the kept fixes together",
        )
