"""The climb: one row per step of the capstone, shown as a table and a chart.

Each row is a configuration measured live (:class:`.steps.StepFigures`), with what ``%%profile``
said about it (GPU idle share, host synchronisations per step). Two figures put a row's model
TFLOP/s in proportion, each under its own name:

- **MFU**: model TFLOP/s over the GPU's data-sheet dense peak in the 16-bit dtype the climb ends
  in (``jupyter_gpu.measure.peaks``), the same denominator for every row; none for a GPU not in
  the table, or a MIG slice, with the reason. Model FLOPs follow
  :data:`jupyter_gpu.tutorials.flops.MODEL_FLOPS_CONVENTION`, which the caption states.
- **% of the matmul rate measured here**: over the model's own GEMMs run sustained on this GPU
  (:func:`.steps.model_matmul_rate`), when the notebook measured it.

A row that was measured but not kept (a step that did not pay off on this GPU) stays in the
table, marked, and the next row starts from the last kept one.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field, replace
from typing import Any

from jupyter_gpu.measure.matmul_rate import NAME as MATMUL_RATE_NAME
from jupyter_gpu.measure.matmul_rate import MatmulRate
from jupyter_gpu.measure.peaks import Mfu, PeakLookup, mfu, peak_for
from jupyter_gpu.tutorials.flops import MODEL_FLOPS_CONVENTION
from jupyter_gpu.tutorials.plots import Chart, bar_chart

from .steps import StepFigures


@dataclass(frozen=True)
class ClimbRow:
    """One measured configuration."""

    #: Names the step in the climb, once (``"sdpa"``); ``label`` is what the table shows.
    key: str
    label: str
    figures: StepFigures
    #: Samples per step, as this configuration trained.
    batch: int
    #: The share of the profiled wall time the GPU ran no kernel (0 to 1), from ``%%profile``.
    gpu_idle: float | None = None
    #: Host synchronisations per step that ``%%profile`` counted.
    syncs_per_step: float | None = None
    #: ``False`` for a step that did not pay off here; ``note`` then says why.
    kept: bool = True
    note: str = ""


@dataclass
class Climb:
    """The rows of the climb, in the order they were measured.

    Attributes:
        gpu_name: the device's name (``torch.cuda.get_device_name()``, ``"CPU"``): MFU's peak is
            looked up by it.
        dtype: the 16-bit dtype the climb ends in (``"bf16"``, ``"fp16"``; ``"fp32"`` on a CPU):
            MFU's peak is this dtype's, for every row.
        matmul_rate: the matmul rate measured here on the model's GEMMs, once measured.
    """

    gpu_name: str
    dtype: str
    matmul_rate: MatmulRate | None = None
    rows: list[ClimbRow] = field(default_factory=list)

    @property
    def peak(self) -> PeakLookup:
        """The data-sheet dense peak MFU divides by, or why there is none."""
        return peak_for(self.gpu_name, self.dtype)

    def add(self, row: ClimbRow) -> ClimbRow:
        """Append a row (its key must be new); returns it.

        Raises:
            ValueError: the key is there already (run the notebook from the top).
        """
        if any(r.key == row.key for r in self.rows):
            raise ValueError(f"{row.key!r} is in the climb already (run the notebook from the top)")
        self.rows.append(row)
        return row

    def mark_not_kept(self, key: str, why: str) -> ClimbRow:
        """Mark a measured row as not kept (the next steps start from the row before), with why."""
        for i, row in enumerate(self.rows):
            if row.key == key:
                self.rows[i] = replace(row, kept=False, note=why)
                return self.rows[i]
        raise KeyError(key)

    def __getitem__(self, key: str) -> ClimbRow:
        for row in self.rows:
            if row.key == key:
                return row
        raise KeyError(key)

    @property
    def start(self) -> ClimbRow:
        """The first row."""
        return self.rows[0]

    @property
    def best_kept(self) -> ClimbRow:
        """The kept row of the most tokens per second so far."""
        return max((r for r in self.rows if r.kept), key=lambda r: r.figures.tokens_per_s)

    @property
    def last_kept(self) -> ClimbRow:
        """The configuration the next step starts from."""
        return [r for r in self.rows if r.kept][-1]

    def mfu(self, row: ClimbRow) -> Mfu:
        """The row's model FLOP/s over the data-sheet dense peak (``fraction`` None: no peak)."""
        return mfu(row.figures.tflops * 1e12, self.gpu_name, self.dtype)

    def of_matmul_rate(self, row: ClimbRow) -> float | None:
        """The row's model TFLOP/s over the matmul rate measured here, or ``None`` before it."""
        if self.matmul_rate is None:
            return None
        return self.matmul_rate.percent_of(row.figures.tflops)

    def _of_rate_text(self, row: ClimbRow) -> str:
        share = self.of_matmul_rate(row)
        return "n/a" if share is None else f"{share:.0%}"

    def speedup(self, row: ClimbRow) -> float:
        """The row's tokens/s over the first row's."""
        return row.figures.tokens_per_s / self.start.figures.tokens_per_s

    def before(self, row: ClimbRow) -> ClimbRow | None:
        """The last kept row measured before ``row`` (what it is compared with)."""
        at = next(i for i, r in enumerate(self.rows) if r.key == row.key)
        kept = [r for r in self.rows[:at] if r.kept]
        return kept[-1] if kept else None

    def gain(self, row: ClimbRow) -> float:
        """The row's tokens/s over the last kept row before it (1.0 for the first)."""
        before = self.before(row)
        return row.figures.tokens_per_s / before.figures.tokens_per_s if before else 1.0

    def verdict(self, row: ClimbRow) -> str:
        """Whether the step helped, judged against the spread of both rows' runs."""
        before = self.before(row)
        if before is None:
            return "the starting point"
        change = self.gain(row) - 1.0
        noise = max(row.figures.spread, before.figures.spread)
        if change > noise:
            return f"helped: {change:+.1%}, more than the runs' spread ({noise:.1%})"
        if -change > noise:
            return f"slower: {change:+.1%}, more than the runs' spread ({noise:.1%})"
        return f"no change beyond the runs' spread: {change:+.1%} (spread {noise:.1%})"

    def line(self, row: ClimbRow) -> str:
        """One row as a sentence, printed under the cell that measured it."""
        idle = "" if row.gpu_idle is None else f", GPU idle {row.gpu_idle:.0%}"
        syncs = "" if row.syncs_per_step is None else f", {row.syncs_per_step:g} syncs/step"
        kept = "" if row.kept else " (not kept)"
        note = f" {row.note}." if row.note else ""
        share = self.of_matmul_rate(row)
        of_rate = "" if share is None else f", {share:.0%} of {MATMUL_RATE_NAME}"
        return (
            f"{row.label}{kept}: batch {row.batch}, {row.figures.describe()}, MFU "
            f"{self.mfu(row).percent_text()} (data-sheet {self.dtype} peak){of_rate}{idle}"
            f"{syncs}; {self.gain(row):.2f}x the step before ({self.verdict(row)}), "
            f"{self.speedup(row):.1f}x the start.{note}"
        )

    def _cells(self, row: ClimbRow) -> list[str]:
        low, high = row.figures.tokens_per_s_range
        peak = row.figures.peak_bytes
        return [
            row.label + ("" if row.kept else " (not kept)"),
            str(row.batch),
            f"{row.figures.tokens_per_s:,.0f}",
            f"{low:,.0f}-{high:,.0f}",
            f"{row.figures.tflops:.1f}",
            self.mfu(row).percent_text(),
            self._of_rate_text(row),
            "n/a" if row.gpu_idle is None else f"{row.gpu_idle:.0%}",
            "n/a" if row.syncs_per_step is None else f"{row.syncs_per_step:g}",
            "n/a" if peak is None else f"{peak / 2**30:.1f}",
            f"{self.gain(row):.2f}x",
            f"{self.speedup(row):.1f}x",
        ]

    HEADERS = (
        "step",
        "batch",
        "tokens/s",
        "3 runs",
        "TFLOP/s",
        "MFU",
        "of matmul rate",
        "GPU idle",
        "syncs/step",
        "peak GiB",
        "vs before",
        "vs start",
    )

    def __str__(self) -> str:
        rows = [list(self.HEADERS)] + [self._cells(r) for r in self.rows]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self.HEADERS))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        return "\n".join([*lines, self.caption()])

    def caption(self) -> str:
        """What the columns mean, with the peak's source and the model-FLOPs convention."""
        peak = self.peak
        if peak.dense_tflops is None:
            mfu_text = f"MFU: none ({peak.why_none})."
        else:
            mfu_text = f"MFU: model TFLOP/s over the data-sheet dense peak, {peak.describe()}."
        rate = (
            f"of matmul rate: model TFLOP/s over {self.matmul_rate.describe()}"
            if self.matmul_rate is not None
            else f"of matmul rate: n/a ({MATMUL_RATE_NAME} was not measured)"
        )
        return (
            f"Model FLOPs: {MODEL_FLOPS_CONVENTION}. {mfu_text} {rate} tokens/s and TFLOP/s: the "
            "median of 3 runs of steps back to back (the range is the slowest and fastest run); "
            "GPU idle and syncs: %%profile of 2 steps."
        )

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th>{esc(h)}</th>" for h in self.HEADERS)
        body = "".join(
            "<tr>"
            + "".join(
                f"<td style='text-align:{'left' if i == 0 else 'right'}'>{esc(c)}</td>"
                for i, c in enumerate(self._cells(r))
            )
            + "</tr>"
            for r in self.rows
        )
        return (
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"<p style='font-size:12px'>{esc(self.caption())}</p>"
        )

    def chart(self) -> Chart:
        """Model TFLOP/s of every row; the data-sheet peak and the measured rate in the title."""
        values = {
            (r.label if r.kept else f"{r.label} (not kept)"): r.figures.tflops for r in self.rows
        }
        peak = self.peak
        scale = [
            "no data-sheet peak"
            if peak.dense_tflops is None
            else f"data-sheet dense {self.dtype} peak {peak.dense_tflops:g}"
        ]
        if self.matmul_rate is not None:
            scale.append(f"{MATMUL_RATE_NAME} {self.matmul_rate.tflops:.0f}")
        return bar_chart(
            values,
            title=f"The climb: model TFLOP/s per step ({'; '.join(scale)})",
            unit="TFLOP/s",
        )
