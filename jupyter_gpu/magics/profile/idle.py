"""The GPU's idle time over whole steps: the window, the busy time, and the split of the rest.

**The window** (what "GPU idle 26 % of 2 steps" is a share of) is whole step periods: from the
start of the first measured step (its ``ProfilerStep#N`` range on the CPU) to the end of the last
one, that end being the later of the step's CPU range end and the end of the last GPU work
launched inside the measured steps. Start-up (the profiler's own start, the warm-up runs) lies
before it; the profiler's closing ``cudaDeviceSynchronize`` (``torch.autograd.profiler.profile``
synchronises in ``__exit__``) lies after the last step's CPU range and launches nothing, so it is
outside too.

Why not "first to last GPU activity": a step whose idle time sits between steps (a kernel, a
sync, then host work before the next launch) loses the idle of one step in N. With kernels of K
seconds and S seconds of host work after each, N steps span ``N*K + (N-1)*S`` from the first
kernel to the last, which reads ``(N-1)*S / (N*K + (N-1)*S)``: 14 % for a true 25 % at 2 steps.
Whole periods read ``N*S / (N*(K+S))``, the true share, at 2 steps as at 20. Holistic Trace
Analysis's temporal breakdown uses the first-to-last window (:func:`first_to_last_idle` is its
definition here; docs/magics.md compares the two).

**Busy** is time with a kernel running on any stream (the union of their spans, cut to the
window). A copy or memset alone does not make the GPU busy: that time is idle "on copies".

**The split** of the idle time is Holistic Trace Analysis's (``BreakdownAnalysis.
_analyze_idle_time_for_stream``): a gap before a kernel whose launch call started after the GPU
went idle waits on the host; a gap before a kernel that was already queued is launch overhead
between kernels (under 30 µs, HTA's ``consecutive_kernel_delay``) or waits on other work.
"""

from __future__ import annotations

from dataclasses import dataclass

from jupyter_gpu.measure import union_length

#: HTA's ``consecutive_kernel_delay``: a shorter gap before a queued kernel is launch overhead.
KERNEL_GAP_S = 30e-6
#: The idle categories, in the order they are listed.
IDLE_KINDS = ("host", "kernels", "copies", "other")
IDLE_LABELS = {
    "host": "waiting on the host",
    "kernels": "between kernels",
    "copies": "on copies",
    "other": "on other work",
}
#: torch.profiler's name for a step's range (``profile.step()`` opens ``ProfilerStep#<n>``).
STEP_PREFIX = "ProfilerStep#"


@dataclass
class GpuActivity:
    """A kernel, copy or memset on the GPU (seconds); ``launched``: its launch call's start."""

    start: float
    end: float
    copy: bool
    launched: float | None = None


@dataclass(frozen=True)
class StepSpan:
    """One step's range on the CPU (seconds); ``number`` is torch's ``ProfilerStep#`` count."""

    number: int
    start_s: float
    end_s: float


def step_number(name: str) -> int | None:
    """``ProfilerStep#3`` -> 3; ``None`` for any other name."""
    if not name.startswith(STEP_PREFIX):
        return None
    digits = name[len(STEP_PREFIX) :]
    return int(digits) if digits.isdigit() else None


@dataclass(frozen=True)
class IdleWindow:
    """The measured steps' window (seconds on the profiler's clock).

    ``cpu_end_s`` is where the last step's CPU range ends; ``end_s`` may be later, where the
    GPU work that step launched ends.
    """

    start_s: float
    end_s: float
    cpu_end_s: float
    steps: tuple[StepSpan, ...]

    @property
    def length_s(self) -> float:
        return max(0.0, self.end_s - self.start_s)

    def launched_inside(self, launched: float | None, start: float) -> bool:
        """Whether GPU work launched at ``launched`` is the steps' own (unknown: its ``start``)."""
        at = launched if launched is not None else start
        return self.start_s <= at <= self.cpu_end_s

    def span_text(self) -> str:
        """``step 3`` or ``steps 3 to 4`` (runs counted from 1, warm-up runs included)."""
        if not self.steps:
            return "the code's run"
        first, last = self.steps[0].number + 1, self.steps[-1].number + 1
        return f"step {first}" if first == last else f"steps {first} to {last}"


def step_window(steps: list[StepSpan], activity: list[GpuActivity]) -> IdleWindow | None:
    """The window of whole step periods over ``steps`` (see the module doc); ``None`` if none.

    ``activity``: every GPU activity of the profile; only what the steps launched extends the
    window's end.
    """
    if not steps:
        return None
    ordered = sorted(steps, key=lambda s: s.start_s)
    start, cpu_end = ordered[0].start_s, max(s.end_s for s in ordered)
    probe = IdleWindow(start, cpu_end, cpu_end, tuple(ordered))
    gpu_end = max(
        (a.end for a in activity if probe.launched_inside(a.launched, a.start)), default=cpu_end
    )
    return IdleWindow(start, max(cpu_end, gpu_end), cpu_end, tuple(ordered))


def busy_s(activity: list[GpuActivity], start: float, end: float, *, copies: bool = False) -> float:
    """Seconds in ``[start, end]`` with a kernel running (and a copy, with ``copies``)."""
    spans = [
        (max(a.start, start), min(a.end, end))
        for a in activity
        if (copies or not a.copy) and a.end > start and a.start < end
    ]
    return union_length(spans)


def first_to_last_idle(activity: list[GpuActivity]) -> float | None:
    """HTA's temporal-breakdown idle share: 1 - union of all GPU work / its first-to-last span.

    ``BreakdownAnalysis._get_idle_time_for_kernels`` (HolisticTraceAnalysis 0.5.0): the span
    runs from the first GPU event's start to the last one's end, kernels, copies and memsets
    alike count as work. ``None`` without GPU work.
    """
    if not activity:
        return None
    start = min(a.start for a in activity)
    end = max(a.end for a in activity)
    if end <= start:
        return None
    return 1.0 - busy_s(activity, start, end, copies=True) / (end - start)


def idle_breakdown(
    activity: list[GpuActivity], window_start: float, window_end: float
) -> dict[str, float]:
    """The GPU's idle seconds in the window, split into ``IDLE_KINDS`` (see the module doc).

    Idle is time with no kernel running (on any stream). Within each idle gap, time a copy or
    memset ran is "copies"; the rest goes by the kernel that ends the gap: launched after the
    gap began, the GPU was waiting on the host; queued before it, a gap under ``KERNEL_GAP_S``
    is launch overhead between kernels and a longer one waited on other work (an event,
    another stream). The gap after the last kernel waits on the host too.
    """
    out = dict.fromkeys(IDLE_KINDS, 0.0)
    kernels = sorted((a for a in activity if not a.copy), key=lambda a: a.start)
    copies = sorted((a.start, a.end) for a in activity if a.copy)
    gaps: list[tuple[float, float, GpuActivity | None]] = []
    cursor = window_start
    for k in kernels:
        if k.start > cursor:
            gaps.append((cursor, min(k.start, window_end), k))
        cursor = max(cursor, k.end)
    if cursor < window_end:
        gaps.append((cursor, window_end, None))
    for g0, g1, nxt in gaps:
        if g1 <= g0:
            continue
        overlap = [(max(a, g0), min(b, g1)) for a, b in copies if b > g0 and a < g1]
        on_copies = union_length(overlap)
        out["copies"] += on_copies
        rest = (g1 - g0) - on_copies
        if nxt is None or (nxt.launched is not None and nxt.launched > g0):
            out["host"] += rest
        elif nxt.launched is not None and g1 - g0 < KERNEL_GAP_S:
            out["kernels"] += rest
        else:  # queued long before, or its launch call not found (HTA: "other")
            out["other"] += rest
    return out
