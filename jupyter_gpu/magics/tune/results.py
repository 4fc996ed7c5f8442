"""What ``%tune -o`` returns, and what its report shows (seconds, bytes, ratios).

``fixes`` are ranked best first (the kept ones, then the others, each by measured speedup; fixes
that failed last); each has ``name``, ``speedup``, ``interval``, ``memory_delta_bytes``,
``loss_delta``, ``kept``, ``code`` and ``on_top_of`` (the kept fixes it was timed on top of;
empty: against the step as it is). ``speedup`` is the kept fixes measured together against the
step as it was (``None`` when no fix was kept), and ``profile`` what the step as it was measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jupyter_gpu.magics.replay.runs import Restored
from jupyter_gpu.measure import Ratio, fmt_ratio, fmt_seconds
from jupyter_gpu.measure.interval import LEVEL

#: Whose figure a fix's speedup is, unless the fix says otherwise.
DEFAULT_SOURCE = "the step with the fix against the step as it is"


@dataclass(frozen=True)
class FixResult:
    """One fix tried on top of the fixes kept before it: its measured gain, and what else changed.

    ``on_top_of``: the names of the kept fixes it was timed on top of, in the order they were
    kept (empty: against the step as it is); ``speedup``/``interval``: the median of the rounds'
    paired ratios, the kept fixes without it against them with it, and its 95 % interval
    (above 1: faster); ``memory_delta_bytes``: its first step's allocator peak minus the kept
    fixes' (CUDA; ``None`` on CPU): what it adds; ``loss_delta``: the loss after one update
    with it and the kept fixes minus the original's, from the same start (``None`` where not
    compared: ``loss_note`` says why); ``kept``: measurably faster and the loss within
    tolerance; ``verdict`` says which. ``replaced_by``: kept in its trial, but the fixes the
    stack took in its place (an alternative that gained less: another compile mode, or 16-bit
    autocast with channels_last against each alone); ``stacked``: in the code %tune gives.
    """

    name: str
    family: str
    speedup: float | None
    interval: tuple[float, float] | None
    memory_delta_bytes: int | None
    loss_delta: float | None
    kept: bool
    code: str
    verdict: str
    ratio: Ratio | None = field(default=None, repr=False)
    #: Whose figure the speedup is ("the step with the new loader against the step as it is").
    source: str = ""
    #: The first step's seconds (a compile's time shows here), with the kept fixes on.
    first_step_s: float | None = None
    loss_note: str = ""
    notes: tuple[str, ...] = ()
    error: str = ""
    on_top_of: tuple[str, ...] = ()
    replaced_by: tuple[str, ...] = ()

    @property
    def stacked(self) -> bool:
        """Kept, and in the stack: in the code cell and the kept fixes' figure."""
        return self.kept and not self.replaced_by

    def baseline(self) -> str:
        """What it was timed against: ``the step as it is``, or ``input pipeline + TF32``."""
        return " + ".join(self.on_top_of) if self.on_top_of else "the step as it is"

    def describe(self) -> str:
        """``bf16 autocast: 1.84x faster (1.79-1.90x; 95 % interval, 12 rounds), kept``."""
        figure = self.ratio.describe() if self.ratio is not None else self.error or "not timed"
        return f"{self.name}: {figure}; {self.verdict}"


@dataclass(frozen=True)
class NotTried:
    """A fix not tried, and the one line that says why (``needs_gpu``: it needs a CUDA GPU)."""

    name: str
    why: str
    needs_gpu: bool = False
    #: ``budget``: not reached before the budget ran out; ``interrupted``: Ctrl-C came first.
    reason: str = "not applicable"


@dataclass(frozen=True)
class Suggestion:
    """A change that needs the user's code changed: not applied, with what it could remove.

    ``share``: the measured share of the step it concerns (``None`` where none is measured,
    e.g. a graph break); ``where``: the line or op it concerns.
    """

    name: str
    text: str
    share: float | None = None
    where: str = ""


@dataclass(frozen=True)
class StackResult:
    """The kept fixes together, in the order they were kept, measured against the step as it was."""

    names: tuple[str, ...]
    ratio: Ratio | None
    #: The product of the fixes' speedups, each timed on top of the ones kept before it: what
    #: they should give together if nothing drifted between the trials.
    product: float
    memory_delta_bytes: int | None = None
    loss_delta: float | None = None
    step_s: float | None = None
    error: str = ""
    #: With an input pipeline kept: a step with the kept fixes on one fixed batch (no loading),
    #: seconds, from the same rounds (``None``: no such figure, e.g. no ``--batches``).
    fixed_batch_step_s: float | None = None
    #: What the figures of the stack say beyond its speedup (the new loader now limits it).
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class StepProfile:
    """The step as it was: its time, where the time went, its memory, its model FLOPs.

    Seconds, bytes, FLOPs; shares are fractions of the profiled steps. ``analysis`` is
    ``%%profile``'s analysis of them (rows, idle split, syncs), ``mfu_before``/``mfu_after``
    the data-sheet MFU (``jupyter_gpu.measure.peaks``) where it can be counted.
    """

    step_s: float
    step_interval_s: tuple[float, float]
    rounds: int
    steps_profiled: int
    gpu_idle_fraction: float | None
    idle_split: str
    loader_share: float
    sync_count: int
    sync_share: float
    sync_places: dict[str, int]
    top_ops: list[tuple[str, float]]
    peak_bytes: int | None
    free_bytes: int | None
    flops_per_step: float | None
    flops_note: str
    mfu_before: Any = None
    mfu_after: Any = None
    analysis: Any = field(default=None, repr=False)
    #: The level ``step_interval_s`` reached (95 % asked: ``jupyter_gpu.measure.interval``).
    step_interval_level: float = LEVEL

    def describe(self) -> str:
        low, high = self.step_interval_s
        return (
            f"{fmt_seconds(self.step_s)} a step ({fmt_seconds(low)}-{fmt_seconds(high)}, "
            f"{self.step_interval_level * 100:.0f} % interval, {self.rounds} rounds)"
        )


@dataclass
class TuneResult:
    """What ``%tune -o`` returns (see the module doc)."""

    expr: str
    device: str
    fixes: list[FixResult] = field(default_factory=list)
    not_tried: list[NotTried] = field(default_factory=list)
    suggestions: list[Suggestion] = field(default_factory=list)
    stack: StackResult | None = None
    profile: StepProfile | None = None
    restored: Restored | None = None
    #: The cell of code that applies the kept fixes.
    code: str = ""
    #: What ``--apply`` did, one sentence per fix (and what it could not apply).
    applied: list[str] = field(default_factory=list)
    interrupted: bool = False
    elapsed_s: float = 0.0
    budget_s: float = 0.0
    #: Each stage's label and seconds, in the order they ran ("trying torch.compile", 96.0);
    #: the rest of ``elapsed_s`` went on the plan, putting things back and ``--apply``.
    stages: list[tuple[str, float]] = field(default_factory=list)
    #: What the budget expected of each fix's stage before starting it (seconds, by the stage's
    #: label: "trying torch.compile"): a stage is begun only where this fits in what is left.
    estimates: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def speedup(self) -> float | None:
        """The kept fixes together against the step as it was (``None``: none kept or timed)."""
        if self.stack is None or self.stack.ratio is None:
            return None
        return self.stack.ratio.value

    @property
    def kept(self) -> list[FixResult]:
        """The fixes in the stack: the code cell's (not those an alternative replaced)."""
        return [f for f in self.fixes if f.stacked]

    def __repr__(self) -> str:
        best = self.fixes[0].describe() if self.fixes else "no fix tried"
        stack = f", together {fmt_ratio(self.speedup)}x" if self.speedup is not None else ""
        return (
            f"<TuneResult: {len(self.fixes)} fixes tried, {len(self.kept)} kept{stack}; best: "
            f"{best}>"
        )
