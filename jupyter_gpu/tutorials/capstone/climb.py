"""The climb: one row per step of the capstone, shown as a table and a chart.

Each row is a configuration timed against the row before it, interleaved
(:func:`.steps.compare_steps`): its figures are the median round's, its gain over the row before
the median of the rounds' paired ratios of model FLOP/s, with its interval. Beside them, what
``%%profile`` measured over steady steps (the GPU's idle share over whole step periods, host
synchronisations per step). Two figures put a row's model TFLOP/s in proportion, each under its
own name:

- **MFU**: model TFLOP/s over the GPU's data-sheet dense peak in the 16-bit dtype the climb
  trains in (``jupyter_gpu.measure.peaks``), the same denominator for every row (an FP8 row's
  model FLOPs are the same count: its MFU is bf16-equivalent, and the line says what it is of
  the FP8 peak); none for a GPU not in the table, or a MIG slice, with the reason. Model FLOPs
  follow :data:`jupyter_gpu.tutorials.flops.MODEL_FLOPS_CONVENTION`, which the caption states.
- **% of the matmul rate measured here**: over the model's own GEMMs run sustained on this GPU
  (:func:`.steps.model_matmul_rate`), when the notebook measured it.

Each row with an idle share makes a claim (``jupyter_gpu.tutorials.claims``): the rate the GPU
ran at while busy (a step's model FLOPs over the busy time of one profiled step period) is at most
the matmul rate measured here (the upper end of its interval; the data-sheet FP8 peak for a row
whose products ran in FP8). An idle share that does not describe the profiled steps fails it.

A row that was measured but not kept (a step that did not pay off on this GPU) stays in the
table, marked, and the next row starts from the last kept one.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from jupyter_gpu.measure import Ratio, fmt_ratio
from jupyter_gpu.measure.matmul_rate import NAME as MATMUL_RATE_NAME
from jupyter_gpu.measure.matmul_rate import MatmulRate
from jupyter_gpu.measure.peaks import Mfu, PeakLookup, mfu, peak_for
from jupyter_gpu.tutorials.claims import Claim, faster
from jupyter_gpu.tutorials.flops import MODEL_FLOPS_CONVENTION
from jupyter_gpu.tutorials.plots import Chart, bar_chart

from .steps import StepComparison, StepFigures

#: A profiled step period this many times the timed step's: the profiler changed the step.
LENGTHENED = 1.2
#: Makes a claim where it is measured (``Results.claim``'s signature).
ClaimMaker = Callable[..., Claim]


@dataclass(frozen=True)
class ClimbRow:
    """One measured configuration.

    Attributes:
        key: names the step in the climb, once (``"sdpa"``); ``label`` is what the table shows.
        figures: the configuration's steps, timed in the rounds of its comparison.
        batch: samples per step, as this configuration trained.
        gain: model FLOP/s over the row before, from the same rounds, with its interval
            (``None`` for the first row).
        gpu_idle: the share of whole step periods the GPU ran no kernel (0 to 1), from
            ``%%profile --steps``.
        syncs_per_step: host synchronisations per step that ``%%profile`` counted.
        profiled_step_s: one step's period under the profiler (its window over its steps).
        matmul_dtype: the dtype its matrix products ran in (``"fp8"`` for FP8 training).
        kept: ``False`` for a step that did not pay off here; ``note`` then says why.
        section_s: wall seconds from the row before to this one (compiles and trials included).
        before_figures: the row before, re-timed in the same rounds (``None`` for the first).
    """

    key: str
    label: str
    figures: StepFigures
    batch: int
    gain: Ratio | None = None
    gpu_idle: float | None = None
    syncs_per_step: float | None = None
    profiled_step_s: float | None = None
    matmul_dtype: str = ""
    kept: bool = True
    note: str = ""
    section_s: float = 0.0
    before_figures: StepFigures | None = None

    @property
    def busy_tflops(self) -> float | None:
        """Model TFLOP/s while the GPU was busy during the profiled steps.

        A step's model FLOPs over the GPU's busy time in one profiled step period,
        ``profiled_step_s * (1 - idle)``: the idle share is a share of *that* period, which the
        profiler can lengthen (on the H200, 07's step with 8 workers ran 1,748 ms a step under
        it against 930 ms timed, and was idle 20 % of it). Without the profiled period, the
        timed rate over (1 - idle).
        """
        if self.gpu_idle is None or self.gpu_idle >= 1.0:
            return None
        return self.figures.flops_per_step / 1e12 / (self.idle_period_s * (1.0 - self.gpu_idle))

    @property
    def idle_period_s(self) -> float:
        """The step period the idle share is of: under the profiler where measured, else timed."""
        return self.profiled_step_s or self.figures.timing.median_s


@dataclass
class Climb:
    """The rows of the climb, in the order they were measured.

    Attributes:
        gpu_name: the device's name (``torch.cuda.get_device_name()``, ``"CPU"``): MFU's peak is
            looked up by it.
        dtype: the 16-bit dtype the climb trains in (``"bf16"``, ``"fp16"``; ``"fp32"`` on a
            CPU): MFU's peak is this dtype's, for every row.
        matmul_rate: the matmul rate measured here on the model's GEMMs, once measured.
        claim_maker: where the rows' claims are recorded (``nb.results.claim``); ``None`` makes
            them unrecorded (tests).
    """

    gpu_name: str
    dtype: str
    matmul_rate: MatmulRate | None = None
    claim_maker: ClaimMaker | None = None
    rows: list[ClimbRow] = field(default_factory=list)
    claims: dict[str, Claim] = field(default_factory=dict)
    _last_s: float = field(default_factory=time.monotonic)

    @classmethod
    def of_session(cls, session: Any, dtype: str) -> Climb:
        """A climb on the notebook's device whose claims go to the notebook's results.

        ``session`` is :func:`jupyter_gpu.tutorials.session.begin`'s; the device's name is
        ``torch.cuda.get_device_name()`` on a GPU, else ``"CPU"``.
        """
        import torch

        name = torch.cuda.get_device_name() if session.gpu else "CPU"
        return cls(name, dtype, claim_maker=session.results.claim)

    @property
    def peak(self) -> PeakLookup:
        """The data-sheet dense peak MFU divides by, or why there is none."""
        return peak_for(self.gpu_name, self.dtype)

    # ------------------------------------------------------------------ rows

    def add(self, row: ClimbRow) -> ClimbRow:
        """Append a row (its key must be new), with its section's time and its idle claim.

        Raises:
            ValueError: the key is there already (run the notebook from the top).
        """
        if any(r.key == row.key for r in self.rows):
            raise ValueError(f"{row.key!r} is in the climb already (run the notebook from the top)")
        now = time.monotonic()
        if not row.section_s:
            row = replace(row, section_s=now - self._last_s)
        self._last_s = now
        self.rows.append(row)
        self.idle_claim(row)
        return row

    def record(
        self,
        key: str,
        label: str,
        measured: StepComparison,
        *,
        batch: int,
        profile: Any = None,
        matmul_dtype: str | None = None,
        keep_if_faster: bool = False,
    ) -> ClimbRow:
        """Add the row of a comparison, with what ``%%profile -o`` measured over its steps.

        With ``keep_if_faster`` a row whose gain's interval does not lie above 1 is marked not
        kept (the cell then undoes the change).
        """
        kept, note = True, ""
        if keep_if_faster and (measured.gain is None or not faster(measured.gain)):
            kept = False
            how = "no before to compare with" if measured.gain is None else measured.gain.describe()
            note = f"Not kept: not measurably faster than the row before ({how})"
        steps = getattr(profile, "steps", 0) or 0
        window_s = getattr(profile, "window_s", 0.0) or 0.0
        row = ClimbRow(
            key,
            label,
            measured.after,
            batch,
            gain=measured.gain,
            gpu_idle=None if profile is None else profile.gpu_idle_fraction,
            syncs_per_step=None if profile is None else profile.sync_count / max(1, steps),
            profiled_step_s=window_s / steps if steps and window_s else None,
            matmul_dtype=matmul_dtype or self._dtype_now(),
            kept=kept,
            note=note,
            before_figures=measured.before,
        )
        return self.add(row)

    def _dtype_now(self) -> str:
        """The products' dtype of a row that names none: FP8 once a kept FP8 row switched it on."""
        kept = [r for r in self.rows if r.kept]
        return "fp8" if kept and kept[-1].matmul_dtype == "fp8" else self.dtype

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

    def __contains__(self, key: object) -> bool:
        return any(row.key == key for row in self.rows)

    @property
    def start(self) -> ClimbRow:
        """The first row."""
        return self.rows[0]

    @property
    def best_kept(self) -> ClimbRow:
        """The kept row of the most model TFLOP/s so far."""
        return max((r for r in self.rows if r.kept), key=lambda r: r.figures.tflops)

    @property
    def last_kept(self) -> ClimbRow:
        """The configuration the next step starts from."""
        return [r for r in self.rows if r.kept][-1]

    def before(self, row: ClimbRow) -> ClimbRow | None:
        """The last kept row measured before ``row`` (the configuration it was compared with)."""
        at = next(i for i, r in enumerate(self.rows) if r.key == row.key)
        kept = [r for r in self.rows[:at] if r.kept]
        return kept[-1] if kept else None

    # ------------------------------------------------------------------ figures

    def mfu(self, row: ClimbRow) -> Mfu:
        """The row's model FLOP/s over the data-sheet dense peak (``fraction`` None: no peak)."""
        return mfu(row.figures.tflops * 1e12, self.gpu_name, self.dtype)

    def of_matmul_rate(self, row: ClimbRow) -> float | None:
        """The row's model TFLOP/s over the matmul rate measured here, or ``None`` before it."""
        if self.matmul_rate is None:
            return None
        return self.matmul_rate.percent_of(row.figures.tflops)

    def speedup(self, row: ClimbRow) -> float:
        """The row's tokens/s over the first row's (medians of two comparisons, not paired)."""
        return row.figures.tokens_per_s / self.start.figures.tokens_per_s

    def verdict(self, row: ClimbRow) -> str:
        """The row's gain over the row before, as the one timing method words it."""
        if row.gain is None:
            return "the starting point"
        return row.gain.describe()

    def busy_bound(self, row: ClimbRow) -> tuple[float | None, str]:
        """What the rate while busy cannot exceed: (TFLOP/s or ``None``, its name).

        The matmul rate measured here (the upper end of its interval) for a row whose products
        ran in the climb's dtype or a wider one; the data-sheet dense FP8 peak for an FP8 row
        (FP8 products run faster than any bf16 rate).
        """
        fp8 = self.fp8_peak(row)
        if fp8 is not None:
            return fp8.dense_tflops, "the data-sheet dense FP8 peak"
        if self.matmul_rate is None:
            return None, MATMUL_RATE_NAME
        return self.matmul_rate.high_tflops, MATMUL_RATE_NAME

    def fp8_peak(self, row: ClimbRow) -> PeakLookup | None:
        """The data-sheet dense FP8 peak for a row whose products ran in FP8, else ``None``.

        The matmul rate measured here is the climb dtype's (bf16): FP8 products run faster than
        it, so it is no yardstick for them.
        """
        return peak_for(self.gpu_name, "fp8") if row.matmul_dtype == "fp8" else None

    def idle_claim(self, row: ClimbRow) -> Claim | None:
        """The claim that the row's idle share fits its timed rate; ``None`` without one."""
        busy = row.busy_tflops
        bound, name = self.busy_bound(row)
        if busy is None or bound is None or row.gpu_idle is None:
            return None
        statement = (
            f"{row.label}: the GPU-idle share fits the step's work (its model FLOPs over the "
            f"busy time of a profiled step is at most {name})"
        )
        measured = (
            f"{row.figures.flops_per_step / 1e12:.1f} TFLOP a step / "
            f"({row.idle_period_s * 1e3:.0f} ms a profiled step x (1 - "
            f"{row.gpu_idle:.1%})) = {busy:.1f} TFLOP/s while busy; {name}: {bound:.1f} TFLOP/s"
        )
        made = self._claim(f"idle_fits_{row.key}", statement, busy <= bound, measured)
        return made

    def claim(self, key: str, statement: str, *, holds: bool, measured: str) -> Claim:
        """Make a claim where it is measured (recorded with the notebook's results, if given).

        Raises:
            ValueError: the key is used twice.
        """
        return self._claim(key, statement, holds, measured)

    def _claim(self, key: str, statement: str, holds: bool, measured: str) -> Claim:
        if key in self.claims:
            raise ValueError(f"{key!r} is claimed already (run the notebook from the top)")
        if self.claim_maker is not None:
            made = self.claim_maker(key, statement, holds=bool(holds), measured=measured)
        else:
            made = Claim(key, statement, bool(holds), measured, judged=False)
        self.claims[key] = made
        return made

    # ------------------------------------------------------------------ text

    def line(self, row: ClimbRow) -> str:
        """The row as a few sentences, printed under the cell that measured it."""
        kept = "" if row.kept else " (not kept)"
        note = f" {row.note}." if row.note else ""
        share = self.of_matmul_rate(row)
        of_rate = "" if share is None else f", {share:.0%} of {MATMUL_RATE_NAME}"
        fp8 = ""
        if row.matmul_dtype == "fp8":
            fp8_mfu = mfu(row.figures.tflops * 1e12, self.gpu_name, "fp8")
            fp8 = f" ({fp8_mfu.percent_text()} of the data-sheet FP8 peak)"
            if share is not None:  # that rate was measured in the climb's dtype, not in FP8
                of_rate = f", {share:.0%} of {MATMUL_RATE_NAME} in {self.dtype} (not FP8's)"
        idle = ""
        if row.gpu_idle is not None:
            idle = f"; over {self._profiled_text(row)}: GPU idle {row.gpu_idle:.0%}"
            if row.syncs_per_step is not None:
                idle += f", {row.syncs_per_step:g} syncs a step"
        text = (
            f"{row.label}{kept}: batch {row.batch}, {row.figures.describe()}, MFU "
            f"{self.mfu(row).percent_text()} (data-sheet dense {self.dtype} peak){fp8}{of_rate}"
            f"{idle}. Over the row before: {self.verdict(row)}.{note}"
        )
        claim = self.claims.get(f"idle_fits_{row.key}")
        return text if claim is None else f"{text}\n{claim.line()}"

    def _profiled_text(self, row: ClimbRow) -> str:
        if row.profiled_step_s is None:
            return "the profiled steps"
        timed_s = row.figures.timing.median_s
        text = (
            f"the profiled steps ({row.profiled_step_s * 1e3:.0f} ms a step under the profiler, "
            f"{timed_s * 1e3:.0f} ms timed"
        )
        if row.profiled_step_s > LENGTHENED * timed_s:
            # On the H200, 07's step with 8 workers ran 1,748 ms a step under the profiler and
            # 930 ms timed, 20 % idle: an idle share the timed steps did not have.
            text += (
                f"; the profiler lengthened them {row.profiled_step_s / timed_s:.1f}x, so the "
                "idle share is theirs, not the timed steps'"
            )
        return text + ")"

    def _cells(self, row: ClimbRow) -> list[str]:
        peak = row.figures.peak_bytes
        share = self.of_matmul_rate(row)
        gain = "" if row.gain is None else f"{fmt_ratio(row.gain.value)}x ({row.gain.span()})"
        busy = row.busy_tflops
        return [
            row.label + ("" if row.kept else " (not kept)"),
            str(row.batch),
            f"{row.figures.tokens_per_s:,.0f}",
            f"{row.figures.tflops:.1f}",
            self.mfu(row).percent_text(),
            "n/a" if share is None else f"{share:.0%}",
            gain,
            "n/a" if row.gpu_idle is None else f"{row.gpu_idle:.0%}",
            "n/a" if busy is None else f"{busy:.0f}",
            "n/a" if row.syncs_per_step is None else f"{row.syncs_per_step:g}",
            "n/a" if peak is None else f"{peak / 2**30:.1f}",
            f"{self.speedup(row):.1f}x",
        ]

    HEADERS = (
        "step",
        "batch",
        "tokens/s",
        "TFLOP/s",
        "MFU",
        "of matmul rate",
        "vs before (interval)",
        "GPU idle",
        "TFLOP/s busy",
        "syncs/step",
        "peak GiB",
        "x start",
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
            mfu_text = (
                f"MFU: model TFLOP/s over the data-sheet dense peak, {peak.describe()} (for every "
                "row, FP8 included: the same model FLOPs)."
            )
        rate = (
            f"of matmul rate: model TFLOP/s over {self.matmul_rate.describe()}"
            if self.matmul_rate is not None
            else f"of matmul rate: n/a ({MATMUL_RATE_NAME} was not measured)"
        )
        return (
            f"Model FLOPs: {MODEL_FLOPS_CONVENTION}. {mfu_text} {rate} tokens/s and TFLOP/s: the "
            "median of a comparison's rounds, each row timed interleaved with the row before "
            "(jupyter_gpu.measure.compare); vs before: model FLOP/s over the row before's in the "
            "same rounds, with its interval. x start: medians of two comparisons, not paired. "
            "GPU idle and syncs: %%profile over steady steps (idle over whole step periods); "
            "TFLOP/s busy: a step's model FLOPs over the busy time of a profiled step (its "
            "period under the profiler x (1 - idle))."
        )

    def section_times(self) -> list[tuple[str, float]]:
        """(row label, seconds from the row before to it), longest first."""
        return sorted(((r.label, r.section_s) for r in self.rows), key=lambda item: -item[1])

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
