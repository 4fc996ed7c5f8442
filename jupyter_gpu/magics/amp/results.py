"""What ``%amp`` returns (``-o``) and what its report shows: the records of each command."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jupyter_gpu.magics.causes import Explanation
from jupyter_gpu.magics.probes.evidence import CallProfile
from jupyter_gpu.magics.replay.runs import Restored
from jupyter_gpu.measure import Comparison, Ratio, fmt_seconds


@dataclass(frozen=True)
class AmpStatus:
    """What ``%amp`` reports: the hooks' autocast setting and TF32 (``-o`` returns this)."""

    autocast_on: bool
    device: str | None
    dtype: str | None
    tf32_matmul: bool
    tf32_conv: bool
    tf32_hardware: bool


@dataclass(frozen=True)
class AmpRun:
    """What ``%%amp -o`` returns: the autocast setting the cell ran under, and its value."""

    device: str
    dtype: str
    value: Any


@dataclass(frozen=True)
class AmpModeResult:
    """One mode's figures for ``%amp compare``.

    Median step time (s); step peak memory (bytes above those in use before the mode's first
    step, from the allocator's trace; ``None`` on CPU); the first step's loss and its distance
    from fp32's; ``profile``: one profiled step (the evidence for the "Why" lines).
    """

    mode: str
    time_s: float | None
    runs: int
    peak_bytes: int | None
    loss: float | None
    loss_diff: float | None
    error: str | None = None
    profile: CallProfile | None = field(default=None, repr=False, compare=False)


@dataclass
class AmpComparison:
    """What ``%amp compare -o`` returns."""

    expr: str
    device: str
    results: list[AmpModeResult] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    #: Where the saved training state was kept: "cuda", "cpu" (host), or "same" (CPU run).
    state_on: str = "same"
    #: The variable held fixed with --batch (``None``: the expression draws its own).
    batch: str | None = None
    notes: list[str] = field(default_factory=list)
    #: Why reduced precision was no faster (the table of causes); empty when it was faster.
    explanations: list[Explanation] = field(default_factory=list)
    #: What was put back after the runs, and the report's line for it.
    restore: Restored | None = None
    #: The modes' interleaved timing (``None`` until timed): ratios with their intervals.
    timing: Comparison | None = field(default=None, repr=False)
    #: Modes not timed apart because they compute exactly as another here (tf32 -> fp32 on CPU).
    same_as: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        times = ", ".join(f"{r.mode} {fmt_seconds(r.time_s)}" for r in self.results)
        return f"<AmpComparison {self.expr} on {self.device}: {times}>"

    def ratio(self, mode: str) -> Ratio | None:
        """fp32's time over ``mode``'s, with its interval (``None`` if either was not timed)."""
        mode = self.same_as.get(mode, mode)
        if self.timing is None or mode == "fp32" or mode not in self.timing.timings:
            return None
        return self.timing.ratio(mode)

    def speedup(self, mode: str) -> float | None:
        """fp32's time over ``mode``'s: the median of the rounds' ratios (``None``: not timed)."""
        if self.same_as.get(mode, mode) == "fp32":
            return 1.0 if self.timing is not None else None
        ratio = self.ratio(mode)
        return ratio.value if ratio is not None else None
