"""What ``%%profile`` returns (``-o``) and what its report shows (seconds, bytes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jupyter_gpu.magics.output.render import fmt_pct
from jupyter_gpu.magics.replay.runs import Restored
from jupyter_gpu.measure import fmt_seconds

from .analysis import RangeRow
from .rows import OpRow


@dataclass
class ProfileResult:
    """What ``%%profile -o`` returns (seconds, bytes). ``profiler`` is torch's own object."""

    rows: list[OpRow]
    gpu_idle_fraction: float | None
    hints: list[str]
    wall_s: float
    trace_file: str | None
    sort: str
    kernel_count: int = 0
    value: Any = None
    profiler: Any = field(default=None, repr=False)
    #: User annotations (record_function ranges), apart from the ops.
    ranges: list[RangeRow] = field(default_factory=list)
    #: Device synchronisations (runtime calls that block the host), exact.
    sync_count: int = 0
    #: Where they were: "cell [3] line 4" -> count (some may be missing: see the note).
    sync_places: dict[str, int] = field(default_factory=dict)
    #: GPU idle seconds by cause: host, kernels (between kernels), copies, other.
    idle_s: dict[str, float] = field(default_factory=dict)
    #: With ``--warmup``/``--steps`` (more than one run): what was put back after those runs.
    warmup: Restored | None = None
    #: The cell's own warnings during those runs, each once, in the magic's words.
    warmup_warnings: list[str] = field(default_factory=list)
    #: Steps measured (``ProfilerStep`` ranges in the window), and the window's length: whole
    #: step periods, start-up and the profiler's closing sync left out (``idle.py``).
    steps: int = 0
    window_s: float = 0.0
    #: Which runs the window holds: ``steps 3 to 4`` (runs counted from 1, warm-up included).
    window: str = ""
    #: Seconds the host was blocked in the syncs over the window.
    sync_blocked_s: float = 0.0
    #: With one measured run: what was put back after the sync pass (the run that placed the
    #: syncs), or why there was none (``sync_note``).
    sync_pass: Restored | None = None
    sync_note: str = ""
    #: Seconds inside the DataLoader's ``__next__`` over the window.
    loader_s: float = 0.0

    def __repr__(self) -> str:
        return (
            f"<ProfileResult: {len(self.rows)} ops, {self.steps} step(s) in "
            f"{fmt_seconds(self.window_s)}, GPU idle "
            f"{fmt_pct(self.gpu_idle_fraction)}, {self.kernel_count} kernels, "
            f"{self.sync_count} syncs, {len(self.hints)} hint(s)>"
        )
