"""Charts for the notebooks: interactive plotly in JupyterLab, a small SVG in exported HTML.

A :class:`Chart` displays as a mimebundle: plotly's own mimetype (drawn offline by the renderer
that ships with the ``plotly`` package, in JupyterLab's light or dark theme:
``magics/output/figure_theme.py``), ``text/html`` holding an inline SVG sketch with axes
and a legend (what nbconvert's HTML export shows, a few KB instead of 4 MB of plotly.js), and
a text line for a terminal. Figures are plain plotly JSON dicts, so plotly is not imported.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jupyter_gpu.magics.output.figure_theme import follow_theme
from jupyter_gpu.measure.digits import three_digits

PLOTLY_MIMETYPE = "application/vnd.plotly.v1+json"
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")
_W, _H = 640, 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 60, 16, 46, 40


@dataclass(frozen=True)
class Chart:
    """A figure as a plotly JSON spec plus an SVG sketch; shows itself when displayed."""

    title: str
    figure: dict[str, Any]
    svg: str
    summary: str

    def _repr_mimebundle_(self, **_: object) -> dict[str, Any]:
        caption = f'<p style="font-size:12px;margin:2px 0">{html.escape(self.summary)}</p>'
        return {
            "text/plain": f"{self.title}: {self.summary}",
            "text/html": self.svg + caption,
            PLOTLY_MIMETYPE: follow_theme(self.figure),
        }


def line_chart(
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    x_label: str = "step",
    y_label: str = "",
    xs: Sequence[float] | None = None,
) -> Chart:
    """One line per entry of ``series`` (y values), against ``xs`` or 0, 1, 2, ...

    Raises:
        ValueError: ``series`` is empty or a series is empty.
    """
    if not series or any(len(ys) == 0 for ys in series.values()):
        raise ValueError("line_chart needs at least one non-empty series")
    traces = []
    for i, (name, ys) in enumerate(series.items()):
        x = list(xs) if xs is not None else list(range(len(ys)))
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": name,
                "x": x[: len(ys)],
                "y": [float(v) for v in ys],
                "line": {"color": PALETTE[i % len(PALETTE)]},
            }
        )
    figure = {
        "data": traces,
        "layout": _layout(title, x_label, y_label),
        "config": {"displaylogo": False},
    }
    lasts = ", ".join(f"{name} {float(ys[-1]):.4g}" for name, ys in series.items())
    return Chart(title, figure, _line_svg(traces, title, x_label, y_label), f"last: {lasts}")


def bar_chart(
    values: Mapping[str, float], *, title: str, unit: str = "", y_label: str = ""
) -> Chart:
    """One bar per entry of ``values``, labelled with its value.

    Raises:
        ValueError: ``values`` is empty.
    """
    if not values:
        raise ValueError("bar_chart needs at least one value")
    labels = list(values)
    numbers = [float(v) for v in values.values()]
    texts = [f"{format_number(v)} {unit}".strip() for v in numbers]
    figure = {
        "data": [
            {
                "type": "bar",
                "x": labels,
                "y": numbers,
                "text": texts,
                "textposition": "auto",
                "marker": {"color": [PALETTE[i % len(PALETTE)] for i in range(len(labels))]},
            }
        ],
        "layout": _layout(title, "", y_label or unit),
        "config": {"displaylogo": False},
    }
    summary = ", ".join(f"{k} {t}" for k, t in zip(labels, texts, strict=True))
    return Chart(title, figure, _bar_svg(labels, numbers, texts, title, y_label or unit), summary)


def format_number(value: float) -> str:
    """Three significant digits, thousands separated: ``1,571``, ``58.2``, ``0.0123``, ``4.80``.

    Trailing zeros stay (``three_digits``) so that an interval's ends and a bar's neighbours read
    alike: ``4.80-4.85 GB/s``, not ``4.8-4.85``.
    """
    if abs(value) >= 999.5:
        return f"{value:,.0f}"
    return three_digits(value)


def _layout(title: str, x_label: str, y_label: str) -> dict[str, Any]:
    return {
        "title": {"text": title},
        "xaxis": {"title": {"text": x_label}},
        "yaxis": {"title": {"text": y_label}},
        "height": 360,
        "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
    }


def _nice_range(lo: float, hi: float) -> tuple[float, float]:
    if not math.isfinite(lo) or not math.isfinite(hi):
        return 0.0, 1.0
    if hi - lo < 1e-12:
        pad = abs(hi) * 0.05 or 1.0
        return lo - pad, hi + pad
    return lo, hi


@dataclass(frozen=True)
class SvgBox:
    """An SVG sketch's size and the margins around its plot area, in pixels."""

    width_px: int
    height_px: int
    left_px: int
    right_px: int
    top_px: int
    bottom_px: int


_BOX = SvgBox(_W, _H, _LEFT, _RIGHT, _TOP, _BOTTOM)


def svg_frame(
    title: str,
    x_label: str,
    y_label: str,
    y_lo: float,
    y_hi: float,
    *,
    box: SvgBox = _BOX,
    x_ends: tuple[str, str] | None = None,
) -> list[str]:
    """The opening ``<svg>`` tag, the title, both axes, the y axis's ends and the axis labels.

    ``x_ends``: the labels at the x axis's left and right ends, where the caller names them.
    The caller appends its marks and the closing ``</svg>``.
    """
    esc = html.escape
    w, h, left, right, top = box.width_px, box.height_px, box.left_px, box.right_px, box.top_px
    bottom = h - box.bottom_px
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        'font-family="sans-serif" font-size="11">',
        f'<text x="{w / 2}" y="16" text-anchor="middle" font-size="13">{esc(title)}</text>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#888"/>',
        f'<line x1="{left}" y1="{bottom}" x2="{w - right}" y2="{bottom}" stroke="#888"/>',
        f'<text x="{left - 4}" y="{top + 4}" text-anchor="end">{format_number(y_hi)}</text>',
        f'<text x="{left - 4}" y="{bottom}" text-anchor="end">{format_number(y_lo)}</text>',
    ]
    if x_ends is not None:
        parts += [
            f'<text x="{left}" y="{bottom + 14}">{esc(x_ends[0])}</text>',
            f'<text x="{w - right}" y="{bottom + 14}" text-anchor="end">{esc(x_ends[1])}</text>',
        ]
    parts += [
        f'<text x="{(left + w) / 2}" y="{h - 6}" text-anchor="middle">{esc(x_label)}</text>',
        f'<text x="12" y="{(top + bottom) / 2}" text-anchor="middle" '
        f'transform="rotate(-90 12 {(top + bottom) / 2})">{esc(y_label)}</text>',
    ]
    return parts


def _line_svg(traces: list[dict[str, Any]], title: str, x_label: str, y_label: str) -> str:
    all_x = [float(x) for t in traces for x in t["x"]]
    all_y = [y for t in traces for y in t["y"] if math.isfinite(y)]
    y_lo, y_hi = _nice_range(min(all_y, default=0.0), max(all_y, default=1.0))
    x_lo, x_hi = _nice_range(min(all_x), max(all_x))
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    parts = svg_frame(title, x_label, y_label, y_lo, y_hi)
    parts.append(f'<text x="{_LEFT}" y="{_H - _BOTTOM + 14}">{x_lo:.4g}</text>')
    parts.append(
        f'<text x="{_W - _RIGHT}" y="{_H - _BOTTOM + 14}" text-anchor="end">{x_hi:.4g}</text>'
    )
    for i, trace in enumerate(traces):
        step = max(1, len(trace["x"]) // 400)  # a few hundred points are plenty for a sketch
        points = " ".join(
            f"{_LEFT + (float(x) - x_lo) / (x_hi - x_lo) * plot_w:.1f},"
            f"{_TOP + (y_hi - y) / (y_hi - y_lo) * plot_h:.1f}"
            for x, y in list(zip(trace["x"], trace["y"], strict=True))[::step]
            if math.isfinite(y)
        )
        colour = trace["line"]["color"]
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{points}"/>'
        )
        parts.append(
            f'<rect x="{_LEFT + 8 + 160 * i}" y="{_TOP - 18}" width="10" height="10" '
            f'fill="{colour}"/><text x="{_LEFT + 22 + 160 * i}" y="{_TOP - 9}">'
            f"{html.escape(str(trace['name'])[:24])}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _wrapped_label(label: str, x: float, y: float, width: int = 24) -> str:
    """A centred label on up to two lines of ``width`` characters (the rest is cut)."""
    words, lines, line = label.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    lines.append(line)
    if len(lines) > 2:
        lines = [lines[0], " ".join(lines[1:])[: width - 1] + "…"]
    spans = "".join(
        f'<tspan x="{x:.1f}" dy="{0 if i == 0 else 12}">{html.escape(text)}</tspan>'
        for i, text in enumerate(lines)
    )
    return f'<text x="{x:.1f}" y="{y}" text-anchor="middle">{spans}</text>'


def _bar_svg(
    labels: list[str], values: list[float], texts: list[str], title: str, y_label: str
) -> str:
    y_hi = max(*values, 0.0) or 1.0
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    parts = svg_frame(title, "", y_label, 0.0, y_hi)
    slot = plot_w / len(labels)
    for i, (label, value, text) in enumerate(zip(labels, values, texts, strict=True)):
        height = max(value, 0.0) / y_hi * plot_h
        x = _LEFT + i * slot + slot * 0.15
        y = _TOP + plot_h - height
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{slot * 0.7:.1f}" height="{height:.1f}" '
            f'fill="{PALETTE[i % len(PALETTE)]}"/>'
            f'<text x="{x + slot * 0.35:.1f}" y="{y - 3:.1f}" text-anchor="middle">'
            f"{html.escape(text)}</text>"
            + _wrapped_label(label, x + slot * 0.35, _H - _BOTTOM + 14)
        )
    parts.append("</svg>")
    return "".join(parts)
