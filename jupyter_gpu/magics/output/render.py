"""Output of the magics: number formats, tables and figures as mimebundles.

Every output carries ``text/plain`` (a terminal IPython shows only that) and, where it helps,
``text/html``. Figures are plotly JSON specs published under plotly's own mimetype, which the
renderer shipped with the ``plotly`` package draws in JupyterLab without any CDN; their HTML
fallback is a small inline SVG, so that a notebook exported to HTML stays light (inline
plotly.js would add about 4 MB per figure). Figures are built as plain dicts: importing plotly
costs half a second, and ``go.Figure`` validation is slow for thousands of events. Every
published figure follows JupyterLab's light or dark theme (``figure_theme.py``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jupyter_gpu.measure import fmt_seconds

from .figure_theme import follow_theme

PLOTLY_MIMETYPE = "application/vnd.plotly.v1+json"

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def fmt_bytes(n: float | None) -> str:
    """Format a byte count with binary units ("1.5 GiB"); ``None`` reads "n/a"."""
    if n is None:
        return "n/a"
    sign = "-" if n < 0 else ""
    value = float(abs(n))
    for unit in _BYTE_UNITS:
        if value < 1024 or unit == _BYTE_UNITS[-1]:
            if unit == "B":
                return f"{sign}{int(value)} B"
            return f"{sign}{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def fmt_signed_bytes(n: float | None) -> str:
    """Format a change in bytes with its sign ("+1.5 GiB", "-12.0 MiB", "+0 B")."""
    if n is None:
        return "n/a"
    return fmt_bytes(n) if n < 0 else "+" + fmt_bytes(n)


def fmt_pct(fraction: float | None) -> str:
    """Format a fraction in [0, 1] as a percentage ("72%")."""
    if fraction is None:
        return "n/a"
    return f"{fraction * 100:.0f}%"


@dataclass
class Cell:
    """One table cell: the text shown and, for sorting, the raw value behind it."""

    text: str
    sort_value: float | str | None = None


@dataclass
class Table:
    """A small table rendered both as aligned plain text and as an HTML table.

    ``numeric`` marks the columns that are right-aligned (numbers). With ``sortable`` the HTML
    table sorts by a column when its header is clicked (a few lines of inline JavaScript that
    only run in a trusted notebook; untrusted, it is a plain table).
    """

    headers: Sequence[str]
    rows: list[list[Cell | str]] = field(default_factory=list)
    numeric: Sequence[bool] = ()
    title: str = ""
    sortable: bool = False

    def _is_numeric(self, col: int) -> bool:
        return col < len(self.numeric) and self.numeric[col]

    def text(self) -> str:
        """The table as aligned plain text, title first."""
        cells = [[_cell_text(c) for c in row] for row in self.rows]
        widths = [len(h) for h in self.headers]
        for row in cells:
            for i, text in enumerate(row):
                widths[i] = max(widths[i], len(text))
        lines = [self.title] if self.title else []
        for row in [list(self.headers), *cells]:
            parts = [
                text.rjust(widths[i]) if self._is_numeric(i) else text.ljust(widths[i])
                for i, text in enumerate(row)
            ]
            lines.append("  ".join(parts).rstrip())
        return "\n".join(lines)

    def html(self) -> str:
        """The table as an HTML fragment (escaped; sortable if asked)."""
        attrs = ' class="jgpu-table"'
        if self.sortable:
            attrs += f' title="click a column header to sort" onclick="{_SORT_JS}"'
        head = "".join(
            f'<th style="text-align:{"right" if self._is_numeric(i) else "left"};'
            f'cursor:{"pointer" if self.sortable else "auto"}">{html.escape(h)}</th>'
            for i, h in enumerate(self.headers)
        )
        body = []
        for row in self.rows:
            tds = []
            for i, cell in enumerate(row):
                align = "right" if self._is_numeric(i) else "left"
                sort = ""
                if isinstance(cell, Cell) and cell.sort_value is not None:
                    sort = f' data-v="{html.escape(str(cell.sort_value))}"'
                tds.append(
                    f'<td style="text-align:{align}"{sort}>{html.escape(_cell_text(cell))}</td>'
                )
            body.append("<tr>" + "".join(tds) + "</tr>")
        caption = f"<caption>{html.escape(self.title)}</caption>" if self.title else ""
        return (
            f"<table{attrs}>{caption}<thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>"
        )


def _cell_text(cell: Cell | str) -> str:
    return cell.text if isinstance(cell, Cell) else cell


# Sorts the rows of the clicked table by the clicked header's column: numbers (data-v) descending
# first click, ascending the next; text alphabetically. Kept as one attribute so that it needs no
# <script> element and no global name.
_SORT_JS = (
    "var th=event.target.closest('th');if(!th)return;"
    "var tb=this.tBodies[0],i=th.cellIndex,d=th.dataset.d==='1'?-1:1;th.dataset.d=d===1?'1':'0';"
    "var k=function(r){var c=r.cells[i],v=c.dataset.v;"
    "return v!==undefined&&v!==''&&!isNaN(v)?parseFloat(v):c.textContent};"
    "Array.from(tb.rows).sort(function(a,b){var x=k(a),y=k(b);"
    "if(typeof x==='number'&&typeof y==='number')return d*(y-x);"
    "return d*String(x).localeCompare(String(y))}).forEach(function(r){tb.appendChild(r)})"
)

_STYLE = (
    "<style>.jgpu-table{border-collapse:collapse;font-size:12px;margin:4px 0}"
    ".jgpu-table th,.jgpu-table td{padding:2px 8px;border-bottom:1px solid "
    "var(--jp-border-color2,#ddd)}.jgpu-table caption{text-align:left;font-weight:bold;"
    "padding:2px 0}.jgpu-note{font-size:12px;margin:2px 0}.jgpu-warn{color:"
    "var(--jp-warn-color0,#b35900)}</style>"
)


def html_block(parts: Sequence[str]) -> str:
    """Join HTML fragments into one output with the shared table style."""
    return _STYLE + "".join(parts)


# A command-line option (``--JupyterGpu.backend=simulated``, ``-o``), ending on a letter or digit
# (not on the sentence's full stop). Browsers may break a line after a hyphen: not inside these.
_OPTION = re.compile(r"(?<![\w-])--?[A-Za-z](?:[\w.-]*\w)?(?:=[\w.:/-]*\w)?")


def html_text(text: str) -> str:
    """``text`` escaped for HTML, with each command-line option kept on one line."""
    return _OPTION.sub(
        lambda m: f'<code style="white-space:nowrap">{m.group(0)}</code>', html.escape(text)
    )


def html_note(text: str, *, warn: bool = False) -> str:
    """One escaped line of text as an HTML paragraph (``warn`` colours it); options never wrap."""
    cls = "jgpu-note jgpu-warn" if warn else "jgpu-note"
    return f'<p class="{cls}">{html_text(text)}</p>'


def html_pre(text: str) -> str:
    """Preformatted, escaped text (source lines, tracebacks)."""
    return f'<pre class="jgpu-note">{html.escape(text)}</pre>'


def publish(text: str, html_text: str | None = None, plotly: dict[str, Any] | None = None) -> None:
    """Display one output: ``text/plain`` always, HTML and a plotly figure if given."""
    from IPython.display import publish_display_data

    data: dict[str, Any] = {"text/plain": text}
    if html_text is not None:
        data["text/html"] = html_text
    if plotly is not None:
        data[PLOTLY_MIMETYPE] = follow_theme(plotly)
    publish_display_data(data)  # type: ignore[no-untyped-call]  # IPython has no types here


def show_note(text: str, *, warn: bool = False) -> None:
    """Display ``text`` as one note: the text, and its HTML paragraph (``warn`` colours it)."""
    publish(text, html_block([html_note(text, warn=warn)]))


def publish_figure(figure: dict[str, Any], fallback_svg: str, summary: str) -> None:
    """Display a plotly figure (JSON spec) with an SVG fallback and a one-line text summary."""
    publish(summary, html_block([fallback_svg, html_note(summary)]), figure)


@dataclass
class Bar:
    """One horizontal bar of a timeline: lane, start and end (seconds), label for hover."""

    lane: str
    start_s: float
    end_s: float
    label: str


def timeline_figure(bars: Sequence[Bar], title: str, *, max_bars: int = 4000) -> dict[str, Any]:
    """A plotly Gantt-like figure: one horizontal bar per event, one row per lane.

    Keeps the ``max_bars`` longest events (the figure stays responsive and the notebook small);
    the title says how many were left out. Times are shown in milliseconds.
    """
    kept = sorted(bars, key=lambda b: b.end_s - b.start_s, reverse=True)[:max_bars]
    lanes: dict[str, list[Bar]] = {}
    for bar in kept:
        lanes.setdefault(bar.lane, []).append(bar)
    traces = []
    for lane, items in lanes.items():
        traces.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": lane,
                "y": [lane] * len(items),
                "base": [round(b.start_s * 1e3, 6) for b in items],
                "x": [round(max(b.end_s - b.start_s, 1e-7) * 1e3, 6) for b in items],
                "text": [b.label for b in items],
                "hovertemplate": "%{text}<br>start %{base:.3f} ms, %{x:.3f} ms<extra>%{y}</extra>",
                "textposition": "none",
            }
        )
    if len(kept) < len(bars):
        title += f" (the {len(kept):,} longest of {len(bars):,} events)"
    layout = {
        "title": {"text": title},
        "barmode": "overlay",
        "xaxis": {"title": {"text": "time (ms)"}},
        "yaxis": {"autorange": "reversed"},
        "height": 160 + 40 * len(lanes),
        "showlegend": False,
        "margin": {"l": 140, "r": 20, "t": 50, "b": 40},
    }
    return {"data": traces, "layout": layout, "config": {"displaylogo": False}}


def timeline_svg(bars: Sequence[Bar], *, width: int = 720, max_bars: int = 300) -> str:
    """A static SVG sketch of a timeline (the longest ``max_bars`` events), a few KB in size."""
    if not bars:
        return ""
    kept = sorted(bars, key=lambda b: b.end_s - b.start_s, reverse=True)[:max_bars]
    lanes = list(dict.fromkeys(b.lane for b in bars))
    t0 = min(b.start_s for b in bars)
    span = max(max(b.end_s for b in bars) - t0, 1e-9)
    label_w, row_h = 130, 18
    plot_w = width - label_w - 10
    height = row_h * len(lanes) + 20
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-size="11" font-family="sans-serif">'
    ]
    for i, lane in enumerate(lanes):
        parts.append(f'<text x="2" y="{i * row_h + 13}">{html.escape(lane[:22])}</text>')
    for bar in kept:
        row = lanes.index(bar.lane)
        x = label_w + (bar.start_s - t0) / span * plot_w
        w = max((bar.end_s - bar.start_s) / span * plot_w, 0.5)
        parts.append(
            f'<rect x="{x:.1f}" y="{row * row_h + 3}" width="{w:.1f}" height="{row_h - 6}" '
            f'fill="{_lane_colour(row)}"><title>{html.escape(bar.label[:80])}</title></rect>'
        )
    parts.append(
        f'<text x="{label_w}" y="{height - 4}">0</text>'
        f'<text x="{width - 10}" y="{height - 4}" text-anchor="end">'
        f"{html.escape(fmt_seconds(span))}</text></svg>"
    )
    return "".join(parts)


def line_svg(
    xs: Sequence[float], ys: Sequence[float], *, width: int = 720, height: int = 160
) -> str:
    """A static SVG polyline of ``ys`` against ``xs`` (at most ~500 points kept)."""
    if len(xs) < 2:
        return ""
    step = max(1, len(xs) // 500)
    pts = list(zip(xs[::step], ys[::step], strict=True))
    if pts[-1] != (xs[-1], ys[-1]):
        pts.append((xs[-1], ys[-1]))
    x0, x1 = min(xs), max(xs)
    y1 = max(*ys, 1e-9)
    sx = (width - 20) / max(x1 - x0, 1e-12)
    sy = (height - 20) / y1
    path = " ".join(f"{10 + (x - x0) * sx:.1f},{height - 10 - y * sy:.1f}" for x, y in pts)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
        f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{path}"/></svg>'
    )


_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")


def _lane_colour(i: int) -> str:
    return _PALETTE[i % len(_PALETTE)]
