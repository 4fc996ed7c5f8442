"""The roofline for notebook 00: is a kernel bound by memory traffic or by arithmetic?

The model (S. Williams, A. Waterman, D. Patterson, "Roofline: an insightful visual performance
model for multicore architectures", Communications of the ACM 52(4), 2009): a kernel that does
``F`` floating-point operations while moving ``B`` bytes to and from the GPU's memory has an
*arithmetic intensity* ``I = F / B`` (FLOP per byte). A GPU that moves ``W`` bytes a second and
computes ``P`` FLOP a second cannot run it faster than ``min(P, W * I)``. Below the *ridge point*
``I* = P / W`` the kernel is **memory-bound** (more arithmetic per byte would be free), above it
**compute-bound**.

Here both roofs are measured in the same run, not read from a data sheet: ``W`` from a device
copy (every byte read once and written once), ``P`` the matmul rate measured here
(:mod:`jupyter_gpu.measure.matmul_rate`). The bytes a kernel moves are counted as its inputs read
once and its outputs written once: the least traffic it can have (a kernel that reads a tensor
twice moves more). Tensors are sized well past the GPU's L2 cache (50 MB on an H100 or H200), so
that repeated calls cannot be served from it.

:func:`measure_points` times the workloads with the one timing method
(:func:`jupyter_gpu.measure.compare`: interleaved rounds, CUDA events on a GPU), and
:func:`roofline_chart` draws the roof and the points (plotly, log-log, with an SVG sketch).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jupyter_gpu.measure import compare
from jupyter_gpu.measure.interval import LEVEL, rounds_interval

from .plots import PALETTE, Chart, SvgBox, format_number, svg_frame

__all__ = [
    "Point",
    "Roof",
    "Workload",
    "add_workload",
    "copy_workload",
    "matmul_workload",
    "measure_points",
    "roofline_chart",
]


@dataclass(frozen=True)
class Workload:
    """One kernel to place on the roofline: what it computes and moves per call, and the call.

    Attributes:
        name: how the chart and the printout name it.
        flops: floating-point operations per call.
        bytes_moved: bytes read from and written to device memory per call (each tensor once).
        run: one call.
    """

    name: str
    flops: float
    bytes_moved: float
    run: Callable[[], object]

    @property
    def intensity(self) -> float:
        """FLOP per byte moved (0 for a copy)."""
        return self.flops / self.bytes_moved


def _element_bytes(dtype: Any) -> int:
    import torch

    return int(torch.empty((), dtype=dtype).element_size())


def copy_workload(numel: int, dtype: Any, device: Any) -> Workload:
    """``dst.copy_(src)``: ``numel`` elements read and written, no arithmetic (the bandwidth)."""
    import torch

    src = torch.randn(numel, device=device).to(dtype)
    dst = torch.empty_like(src)
    return Workload(
        f"copy, {numel * _element_bytes(dtype) / 2**20:,.0f} MiB",
        0.0,
        2.0 * numel * _element_bytes(dtype),
        lambda: dst.copy_(src),
    )


def add_workload(numel: int, dtype: Any, device: Any) -> Workload:
    """``torch.add(a, b, out=c)``: one FLOP per element, two tensors read and one written."""
    import torch

    a = torch.randn(numel, device=device).to(dtype)
    b, c = torch.randn_like(a), torch.empty_like(a)
    name = str(dtype).removeprefix("torch.")
    return Workload(
        f"add (elementwise, {name})",
        float(numel),
        3.0 * numel * _element_bytes(dtype),
        lambda: torch.add(a, b, out=c),
    )


def matmul_workload(m: int, k: int, n: int, dtype: Any, device: Any) -> Workload:
    """``(m, k) @ (k, n)``: ``2 m k n`` FLOPs, both operands read and the product written once."""
    import torch

    a = torch.randn(m, k, device=device).to(dtype)
    b = torch.randn(k, n, device=device).to(dtype)
    c = torch.empty(m, n, device=device, dtype=dtype)
    name = str(dtype).removeprefix("torch.")
    shape = f"{m:,}x{k:,} @ {k:,}x{n:,}"
    return Workload(
        f"matmul {shape} ({name})",
        2.0 * m * k * n,
        float(_element_bytes(dtype) * (m * k + k * n + m * n)),
        lambda: torch.mm(a, b, out=c),
    )


@dataclass(frozen=True)
class Point:
    """A workload's measured time per call, and the rates that follow, with their intervals.

    ``low_s``/``high_s`` bound the median of the rounds' per-call times: the order-statistic
    interval over ``rounds`` rounds (:func:`jupyter_gpu.measure.interval.rounds_interval`), at
    ``level``, the level those rounds reached (95 % asked; 10 rounds reach 98 %).
    """

    name: str
    flops: float
    bytes_moved: float
    seconds: float
    low_s: float
    high_s: float
    rounds: int
    level: float = LEVEL

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes_moved

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.seconds

    @property
    def bytes_per_s(self) -> float:
        return self.bytes_moved / self.seconds

    def bytes_per_s_interval(self) -> tuple[float, float]:
        """(low, high) bytes per second: the time interval, turned over."""
        return self.bytes_moved / self.high_s, self.bytes_moved / self.low_s

    def flops_per_s_interval(self) -> tuple[float, float]:
        return self.flops / self.high_s, self.flops / self.low_s


def measure_points(
    workloads: Sequence[Workload],
    *,
    device: Any,
    rounds: int,
    warmup: int = 2,
    block_s: float = 0.02,
) -> list[Point]:
    """Time every workload in interleaved rounds (the one timing method), one :class:`Point` each.

    ``block_s`` is about how long one timed block of a workload lasts (calls back to back).

    Raises:
        ValueError: no workloads, or ``rounds`` < 1.
    """
    if not workloads:
        raise ValueError("no workloads to time")
    named = {w.name: w.run for w in workloads}
    timed = compare(named, device=device, rounds=rounds, warmup=warmup, block_s=block_s)
    points = []
    for w in workloads:
        times = list(timed[w.name].times_s)
        low, high, level = rounds_interval(times)
        median_s = timed[w.name].median_s
        points.append(Point(w.name, w.flops, w.bytes_moved, median_s, low, high, len(times), level))
    return points


@dataclass(frozen=True)
class Roof:
    """The two roofs, measured: memory bandwidth (bytes/s) and the matmul rate (FLOP/s)."""

    bytes_per_s: float
    flops_per_s: float

    @property
    def ridge(self) -> float:
        """The ridge point: the intensity (FLOP/byte) at which the two roofs meet."""
        return self.flops_per_s / self.bytes_per_s

    def attainable(self, intensity: float) -> float:
        """The most FLOP/s a kernel of this intensity can reach: ``min(P, W * I)``."""
        return min(self.flops_per_s, self.bytes_per_s * intensity)

    def bound(self, intensity: float) -> str:
        """``"memory-bound"`` below the ridge point, ``"compute-bound"`` above it."""
        return "memory-bound" if intensity < self.ridge else "compute-bound"


def roofline_chart(
    roof: Roof,
    points: Sequence[Point],
    *,
    title: str,
    peak_flops_per_s: float | None = None,
    peak_label: str = "data-sheet dense peak",
) -> Chart:
    """The roof and the measured points on log-log axes (TFLOP/s against FLOP/byte).

    ``peak_flops_per_s``, where given, is drawn as a dashed line: a printed figure, not a
    measurement.

    Raises:
        ValueError: no point with a positive intensity.
    """
    shown = [p for p in points if p.flops > 0]
    if not shown:
        raise ValueError("roofline_chart needs a point that does arithmetic")
    intensities = [p.intensity for p in shown] + [roof.ridge]
    x_lo, x_hi = min(intensities) / 4, max(intensities) * 4
    steps = 60
    xs = [x_lo * (x_hi / x_lo) ** (i / steps) for i in range(steps + 1)]
    roof_y = [roof.attainable(x) / 1e12 for x in xs]
    traces: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": "roof (measured here)",
            "x": xs,
            "y": roof_y,
            "line": {"color": "#444"},
        }
    ]
    if peak_flops_per_s:
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": peak_label,
                "x": [x_lo, x_hi],
                "y": [peak_flops_per_s / 1e12] * 2,
                "line": {"color": "#888", "dash": "dash"},
            }
        )
    for i, p in enumerate(shown):
        traces.append(
            {
                "type": "scatter",
                "mode": "markers+text",
                "name": p.name,
                "x": [p.intensity],
                "y": [p.flops_per_s / 1e12],
                "text": [p.name],
                "textposition": "top center",
                "marker": {"size": 11, "color": PALETTE[(i + 1) % len(PALETTE)]},
            }
        )
    figure = {
        "data": traces,
        "layout": {
            "title": {"text": title},
            "xaxis": {
                "title": {"text": "arithmetic intensity (FLOP per byte moved)"},
                "type": "log",
            },
            "yaxis": {"title": {"text": "TFLOP/s"}, "type": "log"},
            "height": 420,
            "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
        },
        "config": {"displaylogo": False},
    }
    summary = f"ridge at {roof.ridge:.3g} FLOP/byte; " + "; ".join(
        f"{p.name}: {p.intensity:.3g} FLOP/byte, {format_number(p.flops_per_s / 1e12)} TFLOP/s"
        for p in shown
    )
    return Chart(title, figure, _svg(roof, shown, title, xs, roof_y, peak_flops_per_s), summary)


_W, _H, _LEFT, _RIGHT, _TOP, _BOTTOM = 640, 320, 64, 16, 30, 44


def _svg(
    roof: Roof,
    points: Sequence[Point],
    title: str,
    xs: list[float],
    roof_y: list[float],
    peak: float | None,
) -> str:
    """A log-log sketch for exported HTML (no JavaScript): the roof, the points, their names."""
    ys = roof_y + [p.flops_per_s / 1e12 for p in points] + ([peak / 1e12] if peak else [])
    y_lo, y_hi = min(y for y in ys if y > 0) / 3, max(ys) * 3
    x_lo, x_hi = xs[0], xs[-1]
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def px(x: float) -> float:
        return _LEFT + math.log(x / x_lo) / math.log(x_hi / x_lo) * plot_w

    def py(y: float) -> float:
        return _TOP + (1 - math.log(y / y_lo) / math.log(y_hi / y_lo)) * plot_h

    esc = html.escape
    bottom = _H - _BOTTOM
    parts = svg_frame(
        title,
        "arithmetic intensity (FLOP/byte, log)",
        "TFLOP/s (log)",
        y_lo,
        y_hi,
        box=SvgBox(_W, _H, _LEFT, _RIGHT, _TOP, _BOTTOM),
        x_ends=(f"{x_lo:.3g}", f"{x_hi:.3g}"),
    )
    line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, roof_y, strict=True))
    parts.append(f'<polyline fill="none" stroke="#444" stroke-width="2" points="{line}"/>')
    if peak:
        parts.append(
            f'<line x1="{_LEFT}" y1="{py(peak / 1e12):.1f}" x2="{_W - _RIGHT}" '
            f'y2="{py(peak / 1e12):.1f}" stroke="#888" stroke-dasharray="5,4"/>'
        )
    ridge_x = px(roof.ridge)
    parts.append(
        f'<line x1="{ridge_x:.1f}" y1="{_TOP}" x2="{ridge_x:.1f}" y2="{bottom}" stroke="#bbb" '
        f'stroke-dasharray="2,3"/><text x="{ridge_x + 3:.1f}" y="{bottom - 4}">ridge</text>'
    )
    for i, p in enumerate(points):
        x, y = px(p.intensity), py(p.flops_per_s / 1e12)
        colour = PALETTE[(i + 1) % len(PALETTE)]
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{colour}"/>'
            f'<text x="{x:.1f}" y="{y - 8:.1f}" text-anchor="middle">{esc(p.name[:40])}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
