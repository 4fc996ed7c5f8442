"""Record a notebook's measured figures and target checks; show them; save them as JSON.

A notebook never types a number into its prose: it adds each measurement here, then shows
the summary table built from them. With ``JUPYTER_GPU_RESULTS_DIR`` set, :meth:`Results.save`
writes ``<notebook>.json`` there, which ``benchmarks/update_results.py`` turns into the
tutorials section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import html
import json
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from jupyter_gpu.measure import Ratio
from jupyter_gpu.measure.matmul_rate import tflops_text

from .claims import Claim
from .plots import format_number
from .sizing import Machine
from .tiers import GpuPlan

RESULTS_ENV = "JUPYTER_GPU_RESULTS_DIR"
SCHEMA_VERSION = 1

_FORMATS = {
    "tokens/s": ",.0f",
    "images/s": ",.0f",
    "x": ".2f",
    "GiB": ".2f",
    "MiB": ".1f",
    "ms": ".2f",
    "s": ".1f",
    "%": ".0f",
}


def format_value(value: float, unit: str, *, in_interval: bool = False) -> str:
    """A figure with the digits its unit deserves, e.g. ``1.27x``, ``412,345 tokens/s``.

    ``in_interval``: the figure stands beside its interval's ends, and all three keep their
    trailing zeros (``680.0 TFLOP/s (638.0-702.3``, not ``680 TFLOP/s (638-702.3``).
    """
    if math.isnan(value):
        return "n/a"
    text = _number(value, unit, in_interval=in_interval)
    if unit == "x":
        return f"{text}x"
    if unit == "%":
        return f"{text}%"
    return f"{text} {unit}" if unit else text


def _number(value: float, unit: str, *, in_interval: bool = False) -> str:
    if unit == "TFLOP/s":  # as the notebooks print rates: 707.9, and 0.000141 for tiny kernels
        return tflops_text(value)
    spec = _FORMATS.get(unit)
    if spec is not None:
        return format(value, spec)
    if float(value).is_integer() and not in_interval:  # a count: 48, not 48.0
        return f"{value:,.0f}"
    # Any other unit (µs, GB/s, FLOP/byte): as the notebooks print such figures (7.24 µs, not
    # 7.242; 3,010 GB/s).
    return format_number(value)


@dataclass(frozen=True)
class Figure:
    """One measured number: what it is, its value and unit, and how it was measured."""

    key: str
    label: str
    value: float
    unit: str
    detail: str = ""

    def text(self) -> str:
        """The value with its unit."""
        return format_value(self.value, self.unit)


@dataclass(frozen=True)
class Check:
    """A measured figure against a target (``value >= target``).

    ``met`` is ``None`` where the target does not apply (it is set for full-size runs on the
    GPU named in ``applies_to``, not for smoke or CPU runs, nor for an emulated smaller tier).
    A ratio measured in rounds carries its interval (``low``/``high``): it meets its target
    only where the interval's low end does, as a claim holds only where its interval shows it;
    a median above the target with an interval reaching below is not shown to meet it.
    """

    key: str
    label: str
    value: float
    target: float
    unit: str
    met: bool | None
    applies_to: str
    low: float | None = None
    high: float | None = None

    def measured(self) -> str:
        """``0.84x (0.63-1.10x)``: the value, and its interval where it has one."""
        if self.low is None or self.high is None:
            return format_value(self.value, self.unit)
        text = format_value(self.value, self.unit, in_interval=True)
        low = _number(self.low, self.unit, in_interval=True)
        return f"{text} ({low}-{format_value(self.high, self.unit, in_interval=True)})"

    def verdict(self) -> str:
        """``met``, ``NOT met`` or why it does not apply."""
        if self.met is None:
            return f"n/a (target is for {self.applies_to} at full size)"
        if self.met:
            return "met"
        if self.low is not None and self.value >= self.target:
            return "NOT met: its interval reaches below the target"
        return "NOT met"


class Results:
    """The figures and checks of one notebook run.

    Raises (from :meth:`add` and :meth:`check`):
        ValueError: a key is used twice, or a value is not a finite number.
    """

    def __init__(self, notebook: str, machine: Machine, plan: GpuPlan | None = None) -> None:
        self.notebook = notebook
        self.machine = machine
        self.plan = plan
        self.figures: dict[str, Figure] = {}
        self.checks: dict[str, Check] = {}
        self.claims: dict[str, Claim] = {}
        self.started = time.time()

    def add(self, key: str, label: str, value: float, unit: str, detail: str = "") -> float:
        """Record a figure; returns ``value`` so a measurement reads ``x = results.add(...)``."""
        self._new_key(key, self.figures)
        number = _finite(key, value)
        self.figures[key] = Figure(key, label, number, unit, detail)
        return number

    def check(
        self,
        key: str,
        label: str,
        value: float | Ratio,
        target: float,
        unit: str = "x",
        *,
        applies_to: str = "H200",
    ) -> Check:
        """Compare ``value`` with ``target`` (higher is better) and record the outcome.

        A :class:`~jupyter_gpu.measure.Ratio` meets the target only where its interval's low
        end does (see :class:`Check`). The outcome is only judged on a full-size GPU run whose
        GPU name contains ``applies_to``, at the tier the GPU itself picks (not an emulated
        one); elsewhere the check is recorded as not applicable.
        """
        self._new_key(key, self.checks)
        low = high = None
        if isinstance(value, Ratio):
            low, high = _finite(key, value.low), _finite(key, value.high)
            value = value.value
        number = _finite(key, value)
        gpu = self.machine.gpu_name or ""
        emulated = self.plan is not None and self.plan.emulated
        applies = self.machine.mode == "gpu" and not emulated and applies_to.lower() in gpu.lower()
        shown = (low if low is not None else number) >= target
        check = Check(
            key, label, number, target, unit, shown if applies else None, applies_to, low, high
        )
        self.checks[key] = check
        return check

    def claim(
        self,
        key: str,
        statement: str,
        *,
        holds: bool,
        measured: str,
        applies_to: str = "",
    ) -> Claim:
        """Check a sentence where it is made, record it, and return it (the cell shows it).

        ``statement`` is the sentence the notebook teaches; ``holds`` whether this run's
        measurement bears it out; ``measured`` what was measured, in words with its figures
        (printed either way). The claim counts for the notebook's verdict on a full-size GPU
        run whose GPU name contains ``applies_to`` ("" for any GPU), at the tier the GPU picks
        (see :mod:`.claims`).

        Raises:
            ValueError: the key is used twice.
        """
        self._new_key(key, self.claims)
        gpu = self.machine.gpu_name or ""
        emulated = self.plan is not None and self.plan.emulated
        judged = self.machine.mode == "gpu" and not emulated and applies_to.lower() in gpu.lower()
        made = Claim(key, statement, bool(holds), measured, judged)
        self.claims[key] = made
        return made

    def __getitem__(self, key: str) -> float:
        return self.figures[key].value

    def _new_key(
        self, key: str, table: dict[str, Figure] | dict[str, Check] | dict[str, Claim]
    ) -> None:
        if key in table:
            raise ValueError(f"{key!r} is recorded already (run the notebook from the top)")

    def as_dict(self) -> dict[str, object]:
        """JSON-ready: notebook, machine, date, figures, checks."""
        return {
            "schema": SCHEMA_VERSION,
            "notebook": self.notebook,
            "machine": self.machine.as_dict(),
            "tier": self.plan.as_dict() if self.plan else None,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(self.started)),
            "elapsed_s": time.time() - self.started,
            "figures": [asdict(f) for f in self.figures.values()],
            "checks": [asdict(c) for c in self.checks.values()],
            "claims": [asdict(c) for c in self.claims.values()],
        }

    def save(self, directory: str | Path | None = None) -> Path | None:
        """Write ``<notebook>.json`` into ``directory`` or ``$JUPYTER_GPU_RESULTS_DIR``.

        Returns the path, or ``None`` when neither is set (nothing is written then).
        """
        target = directory or os.environ.get(RESULTS_ENV)
        if not target:
            return None
        folder = Path(target)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.notebook}.json"
        path.write_text(json.dumps(self.as_dict(), indent=1) + "\n")
        return path

    def __str__(self) -> str:
        lines = [f"{self.notebook}: measured on {self._where()}"]
        width = max((len(f.label) for f in self.figures.values()), default=10)
        for fig in self.figures.values():
            extra = f"  ({fig.detail})" if fig.detail else ""
            lines.append(f"  {fig.label:<{width}}  {fig.text()}{extra}")
        for check in self.checks.values():
            target = format_value(check.target, check.unit)
            lines.append(
                f"  target: {check.label} {check.measured()} >= {target}: {check.verdict()}"
            )
        failed = [c for c in self.claims.values() if not c.holds]
        if self.claims:
            lines.append(
                f"  claims: {len(self.claims) - len(failed)} of {len(self.claims)} held"
                + "".join(f"\n    {c.line()}" for c in failed)
            )
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _where(self) -> str:
        m = self.machine
        device = m.gpu_name if m.has_gpu else f"CPU only ({m.cpu_count} cores)"
        sizes = f"{m.mode} sizes"
        if self.plan is not None and m.mode == "gpu":
            sizes = f"tier {self.plan.tier.name}{' (emulated)' if self.plan.emulated else ''}"
        return f"{device}, torch {m.torch_version}, {sizes}"

    def _repr_html_(self) -> str:
        esc = html.escape
        rows = "".join(
            f"<tr><td style='text-align:left'>{esc(f.label)}</td>"
            f"<td style='text-align:right'>{esc(f.text())}</td>"
            f"<td style='text-align:left'>{esc(f.detail)}</td></tr>"
            for f in self.figures.values()
        )
        checks = "".join(
            f"<tr><td style='text-align:left'>{esc(c.label)}</td><td style='text-align:right'>"
            f"{esc(c.measured())}</td><td style='text-align:left'>&ge; "
            f"{esc(format_value(c.target, c.unit))}: <b>{esc(c.verdict())}</b></td></tr>"
            for c in self.checks.values()
        )
        check_part = (
            f"<tr><th colspan='3' style='text-align:left'>targets</th></tr>{checks}"
            if checks
            else ""
        )
        return (
            f"<p><b>{esc(self.notebook)}</b>: measured on {esc(self._where())}</p>"
            "<table><thead><tr><th style='text-align:left'>figure</th><th>value</th>"
            f"<th style='text-align:left'>how</th></tr></thead><tbody>{rows}{check_part}"
            "</tbody></table>"
        )


def _finite(key: str, value: float) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{key!r}: {value!r} is not a finite number")
    return number
