"""What ``%compile`` returns (``-o``) and what its reports show: the result and its bench."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jupyter_gpu.magics.causes import Explanation
from jupyter_gpu.magics.replay.runs import Restored
from jupyter_gpu.measure import MachineNotes, Ratio, Timing

from .dynamo_watch import CompileReport


@dataclass(frozen=True)
class BenchResult:
    """Eager vs compiled steady-state time of ``expr``, timed in interleaved rounds.

    ``eager``/``compiled`` hold one per-call time per round (seconds); ``ratio`` is the
    compiled speedup with its interval (``jupyter_gpu.measure.compare``).
    """

    expr: str
    eager: Timing
    compiled: Timing
    cuda: bool = False
    #: What was put back after the runs, and the report's line for it.
    restored: Restored | None = field(default=None, compare=False)
    #: The expression's own warnings during the runs, each once, in the magic's words.
    warnings: tuple[str, ...] = ()
    #: Eager time over compiled time, round by round: the median and its interval.
    ratio: Ratio | None = None
    #: What was not steady on the machine while it was timed (nothing: steady).
    machine: MachineNotes = field(default_factory=MachineNotes)
    #: How the figures were taken, in one sentence.
    method: str = ""

    @property
    def eager_s(self) -> float:
        return self.eager.median_s

    @property
    def compiled_s(self) -> float:
        return self.compiled.median_s

    @property
    def runs(self) -> tuple[int, int]:
        """Timed runs (eager, compiled)."""
        return self.eager.runs, self.compiled.runs

    @property
    def speedup(self) -> float:
        """Eager time over compiled time, the median of the rounds' ratios (above 1: faster)."""
        if self.ratio is not None:
            return self.ratio.value
        return self.eager.median_s / self.compiled.median_s if self.compiled.median_s else 0.0


@dataclass
class CompileResult:
    """What ``%compile -o`` returns.

    ``reports`` grows when a later cell that calls this model or function compiles or
    recompiles it (only those: another result's compiles are not this one's). ``quiet`` (from
    ``-q``) keeps this result's later reports from printing. ``explanations`` says why the
    compiled code was slower or no faster, or what stood in its way.
    """

    name: str
    eager: Any = field(repr=False)
    compiled: Any = field(repr=False)
    options: dict[str, Any]
    reports: list[CompileReport] = field(default_factory=list)
    bench: BenchResult | None = None
    quiet: bool = False
    explanations: list[Explanation] = field(default_factory=list)

    def owns(self, report: CompileReport, called: set[str]) -> bool:
        """Whether ``report`` (a cell's compiles) is this result's.

        It is when the cell called this module, or (a function) compiled its code.
        """
        if self.name in called:
            return True
        code = getattr(self.eager, "__code__", None)
        if code is None:
            return False
        return any(
            file == code.co_filename and line == code.co_firstlineno
            for file, line, _ in report.frame_codes
        )

    def __repr__(self) -> str:
        bench = f", speedup={self.bench.speedup:.2f}x" if self.bench else ""
        graphs = sum(r.graphs for r in self.reports)
        breaks = sum(r.graph_break_count for r in self.reports)
        return (
            f"<CompileResult {self.name}: {len(self.reports)} report(s), {graphs} graph(s), "
            f"{breaks} graph break(s){bench}>"
        )
