"""Turn a finished ``torch.profiler.profile`` into rows, a timeline, the GPU idle time and hints.

Reads only what torch 2.4+ profilers have in common: ``events()`` (``FunctionEvent``: ``id``,
``name``, ``time_range``, ``device_type``, ``cpu_parent``, ``is_python_function``, ``stack``,
``is_user_annotation``, ``thread``, ``device_index``), and ``key_averages()`` where the events
lack a field ``rows`` reads.

What is what:

- ops are the table's rows; user annotations (``record_function`` ranges such as
  ``Optimizer.step#AdamW.step``, on the CPU and their span on the GPU) are ranges, listed apart:
  they are neither ops nor kernels, and the GPU span of one holds the kernels of many ops;
- the profiler's own bookkeeping (CUPTI's "Activity Buffer Request" and the like) is dropped;
- the measured steps are torch's ``ProfilerStep#N`` ranges (``profile.step()`` opens them); only
  what happens inside them counts: the table, the ranges, the syncs (``syncs.py`` says what one
  is), the timeline;
- the GPU's idle time is measured over the measured steps only (``idle.py`` defines the window:
  whole step periods, without start-up and without the profiler's closing synchronisation) and
  split as Holistic Trace Analysis does it; events outside the steps (the profiler's own
  ``cudaDeviceSynchronize`` as it stops) are left out of the table too;
- the host's own shares of the window: time inside the DataLoader's ``__next__`` (torch's range
  ``enumerate(DataLoader)#...__next__``) and time blocked in the user's syncs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from jupyter_gpu.magics.causes import Evidence, ProfileFacts, explain
from jupyter_gpu.magics.output.render import Bar, fmt_pct
from jupyter_gpu.measure import union_length

from .idle import (
    IDLE_LABELS,
    GpuActivity,
    IdleWindow,
    StepSpan,
    busy_s,
    idle_breakdown,
    step_number,
    step_window,
)
from .places import event_place, is_python_event, stack_of
from .rows import BOOKKEEPING, OpRow, OpTotals, device_kind, rows_from_key_averages
from .syncs import Syncs, is_sync

_US = 1e-6
#: torch's DataLoader iterators time each ``__next__`` in a range of this name
#: (``torch/utils/data/dataloader.py``: ``enumerate(DataLoader)#<iterator class>.__next__``).
LOADER_RANGE = "enumerate(DataLoader)#"
_MATMUL_OPS = (
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::matmul",
    "aten::linear",
    "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::convolution",
    "aten::cudnn_convolution",
)


@dataclass
class RangeRow:
    """One user annotation (``record_function`` range): calls, CPU time, GPU span (seconds)."""

    name: str
    calls: int = 0
    cpu_s: float = 0.0
    gpu_s: float = 0.0


@dataclass
class Analysis:
    """What the profile showed: op rows, annotation ranges, timeline, GPU idle time, hints."""

    rows: list[OpRow] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    #: The measured steps' window (``idle.py``); ``None`` where the profile has no steps.
    window: IdleWindow | None = None
    window_s: float = 0.0
    gpu_busy_s: float | None = None
    kernel_count: int = 0
    hints: list[str] = field(default_factory=list)
    ranges: list[RangeRow] = field(default_factory=list)
    syncs: Syncs = field(default_factory=Syncs)
    #: Idle seconds per IDLE_KINDS category (empty without CUDA).
    idle_s: dict[str, float] = field(default_factory=dict)
    #: The GPU work the measured steps launched (seconds), for other definitions of idle (HTA's).
    activity: list[GpuActivity] = field(default_factory=list)
    #: GPU work launched before the steps that ran on into them (a warm-up run's tail): busy
    #: time in the window, but not the steps' own (not in the table, not the window's end).
    spill: list[GpuActivity] = field(default_factory=list)
    #: Seconds inside the DataLoader's ``__next__`` (the union of its ranges), and the range.
    loader_s: float = 0.0
    loader_range: str = ""
    #: With ``stack``: whether torch recorded any Python frame (a Python-function event or a
    #: stack on an event); torch 2.11 on its own records none, and "called from" stays empty.
    python_frames: bool = False
    #: What the hints read about the notebook's DataLoaders (set by the magic; ``loaders.py``).
    loader_seen: str = ""
    loader_fix: str = ""

    @property
    def steps(self) -> int:
        """How many steps were measured (1 for a profile without step ranges)."""
        return len(self.window.steps) if self.window is not None and self.window.steps else 1

    def idle_split(self) -> str:
        """``waiting on the host 80%, between kernels 15%, on copies 5%`` (largest first)."""
        total = sum(self.idle_s.values())
        if total <= 0:
            return ""
        parts = sorted(self.idle_s.items(), key=lambda kv: -kv[1])
        return ", ".join(
            f"{IDLE_LABELS[k]} {fmt_pct(v / total)}" for k, v in parts if v / total >= 0.005
        )

    @property
    def gpu_idle_fraction(self) -> float | None:
        """Fraction of the window with no kernel running (``None``: no GPU)."""
        if self.gpu_busy_s is None or self.window_s <= 0:
            return None
        return max(0.0, 1.0 - self.gpu_busy_s / self.window_s)


def _gpu_kinds() -> frozenset[int]:
    """The ``device_kind`` of events drawn on a GPU lane: CUDA, PrivateUse1 and XPU."""
    from torch._C._autograd import DeviceType  # what FunctionEvent.device_type holds

    return frozenset(
        int(getattr(DeviceType, n).value)
        for n in ("CUDA", "PrivateUse1", "XPU")
        if hasattr(DeviceType, n)
    )


def _step_of(evt: Any) -> int | None:
    """The ``ProfilerStep#N`` number of a step's range, else ``None``.

    torch names the event ``ProfilerStep*`` (``profiler_util._rewrite_name``, so that its table
    adds the steps up) and keeps ``ProfilerStep#N`` as its ``trace_name``.
    """
    name = evt.name
    if not name.startswith("ProfilerStep"):
        return None
    number = step_number(getattr(evt, "trace_name", None) or name)
    return number if number is not None else -1  # a step whose number torch did not keep


def _is_step(evt: Any) -> bool:
    return evt is not None and _step_of(evt) is not None


def _steps_and_launches(
    events: Any, gpu_kinds: frozenset[int]
) -> tuple[list[StepSpan], dict[int, float]]:
    """The CPU's ``ProfilerStep#N`` ranges, and each runtime call's start by its id (seconds)."""
    steps: list[StepSpan] = []
    launches: dict[int, float] = {}
    for evt in events:
        name = evt.name
        if name.startswith("cu"):  # a CUDA runtime or driver call (or a kernel: checked next)
            if device_kind(evt) not in gpu_kinds:
                launches[evt.id] = evt.time_range.start * _US
        elif name.startswith("ProfilerStep") and device_kind(evt) not in gpu_kinds:
            number = _step_of(evt)
            if number is not None:
                tr = evt.time_range
                steps.append(StepSpan(number, tr.start * _US, tr.end * _US))
    steps.sort(key=lambda s: s.start_s)
    if any(s.number < 0 for s in steps):  # numbers lost: count the steps in order
        steps = [StepSpan(i, s.start_s, s.end_s) for i, s in enumerate(steps)]
    return steps, launches


def analyse(
    prof: Any,
    *,
    cuda: bool,
    autocast_on: bool,
    cell_names: dict[str, int],
    stack: bool = False,
    timeline: bool = True,
) -> Analysis:
    """Rows, ranges, syncs, timeline and the idle window of a stopped profiler.

    Only the measured steps count (their ``ProfilerStep#N`` ranges; a profile without any is
    read whole). ``stack``: the profiler recorded Python stacks, which place the syncs (else the
    sync pass does, later). One pass over the events gives the per-op totals, the timeline bars
    (skipped without ``timeline``: nothing shows them), the GPU activity and the syncs. Most
    events are ops nested in other ops and need nothing but their totals, so they leave the loop
    first. The per-event work adds to torch's own parsing of the trace (the target is within
    10 % of a bare profiler printing its table). ``hints`` are left empty: the magic asks for
    them once the sync pass has placed the syncs (:func:`hints`).
    """
    events = prof.events()
    gpu_kinds = _gpu_kinds()
    steps, launches = _steps_and_launches(events, gpu_kinds)
    # Before the GPU work is known, the steps' CPU span decides what is theirs.
    probe = (
        IdleWindow(steps[0].start_s, steps[-1].end_s, max(s.end_s for s in steps), tuple(steps))
        if steps
        else None
    )
    totals = OpTotals.for_events(events)
    analysis = Analysis()
    bars = analysis.bars
    places: dict[str, Counter[str]] = {}
    ranges: dict[str, RangeRow] = {}
    loader_spans: list[tuple[float, float]] = []
    syncs = analysis.syncs
    first_start, last_end = float("inf"), float("-inf")
    activity = analysis.activity
    threads: dict[int, str] = {}
    for evt in events:
        kind = device_kind(evt)
        gpu = kind in gpu_kinds
        name = evt.name
        tr = evt.time_range
        start, end = tr.start * _US, tr.end * _US
        if probe is not None:
            if gpu:
                if not probe.launched_inside(launches.get(evt.id), start):
                    if (
                        end > probe.start_s
                        and not evt.is_user_annotation
                        and name not in BOOKKEEPING
                    ):
                        lowered = name.lower()
                        copy = "memcpy" in lowered or "memset" in lowered
                        analysis.spill.append(GpuActivity(start, end, copy, launches.get(evt.id)))
                    continue
            elif not probe.start_s <= start <= probe.cpu_end_s:
                continue  # start-up, or the profiler's own closing synchronisation
        if totals is not None:
            try:
                totals.add(evt, kind)
            except (AttributeError, TypeError):  # an event unlike the first: torch's own sums
                totals = None
        if name in BOOKKEEPING or name == "[memory]":
            continue
        if evt.is_user_annotation:
            number = _step_of(evt)
            if number is not None:  # a step itself: the window, and a lane of its own
                if timeline and not gpu:
                    bars.append(
                        Bar("steps", start, end, f"step {number + 1}" if number >= 0 else "step")
                    )
                continue
            _add_range(ranges, name, gpu, end - start)
            if not gpu and name.startswith(LOADER_RANGE):
                loader_spans.append((start, end))
                analysis.loader_range = name
            if not gpu and _is_top(evt) and not evt.is_async:
                first_start, last_end = min(first_start, start), max(last_end, end)
                if timeline:
                    bars.append(Bar("ranges", start, end, name[:120]))
            continue
        if gpu:
            lowered = name.lower()
            copy = "memcpy" in lowered or "memset" in lowered
            activity.append(GpuActivity(start, end, copy, launches.get(evt.id)))
            if timeline:
                stream = getattr(evt, "device_resource_id", None)
                lane = f"GPU {evt.device_index}" + (f" stream {stream}" if stream else "")
                bars.append(Bar(lane, start, end, name[:120]))
            if not copy:
                analysis.kernel_count += 1
            last_end = max(last_end, end)
            continue
        if name.startswith("cu") and is_sync(name):
            syncs.by_call[name] += 1
            syncs.blocked_s += end - start
            if stack:
                where = event_place(evt, cell_names)
                if where:
                    syncs.places[where] += 1
        if not stack and (not _is_top(evt) or evt.is_async):
            continue  # an op inside another op, or an async one: not on the timeline
        if stack and is_python_event(evt):
            analysis.python_frames = True
            continue
        frames = stack_of(evt) if stack else []
        if frames:
            analysis.python_frames = True
        if stack and (not _is_top(evt) or frames):
            where = event_place(evt, cell_names)
            if where:
                places.setdefault(name, Counter())[where] += 1
        top = _top_level(evt) if stack else _is_top(evt) and not evt.is_async
        if top:
            if timeline:
                lane = threads.setdefault(evt.thread, f"CPU thread {len(threads)}")
                bars.append(Bar(lane, start, end, name[:120]))
            first_start, last_end = min(first_start, start), max(last_end, end)
    if stack and syncs.places:
        syncs.places_from = "stack"
    called_from = {name: counter.most_common(1)[0][0] for name, counter in places.items()}
    if totals is not None:
        analysis.rows = totals.rows(called_from)
    else:
        analysis.rows = rows_from_key_averages(prof, called_from)
    # A name recorded as a range (record_function) is shown as a range only, even where
    # another event of that name lacks torch's annotation flag (on the H200 a training step's
    # op table still listed an "Optimizer.step#AdamW.step" row).
    analysis.rows = [row for row in analysis.rows if row.name not in ranges]
    analysis.ranges = sorted(ranges.values(), key=lambda r: -(r.gpu_s or r.cpu_s))
    analysis.loader_s = union_length(loader_spans)
    window = step_window(steps, activity)
    if window is None and first_start < last_end:  # no steps: the run as a whole
        window = IdleWindow(first_start, last_end, last_end, ())
    analysis.window = window
    if window is not None:
        analysis.window_s = window.length_s
        syncs.steps = analysis.steps
    if cuda:
        on_gpu = activity + analysis.spill
        analysis.gpu_busy_s = (
            busy_s(on_gpu, window.start_s, window.end_s) if window is not None else 0.0
        )
        if window is not None:
            analysis.idle_s = idle_breakdown(on_gpu, window.start_s, window.end_s)
    return analysis


def _add_range(ranges: dict[str, RangeRow], name: str, gpu: bool, seconds: float) -> None:
    row = ranges.get(name)
    if row is None:
        row = ranges[name] = RangeRow(name)
    if gpu:
        row.gpu_s += seconds
    else:
        row.calls += 1
        row.cpu_s += seconds


def _is_top(evt: Any) -> bool:
    """Nothing above it but (at most) its step's range: the step is the frame, not an op."""
    parent = evt.cpu_parent
    return parent is None or (_is_step(parent) and parent.cpu_parent is None)


def _top_level(evt: Any) -> bool:
    """An op with no op above it (Python-function events and the step's range do not count)."""
    parent = evt.cpu_parent
    while parent is not None:
        if not (is_python_event(parent) or _is_step(parent)):
            return False
        parent = parent.cpu_parent
    return not getattr(evt, "is_async", False)


def facts(a: Analysis, *, cuda: bool, autocast_on: bool) -> ProfileFacts:
    """What the table of causes reads from this analysis (``causes/``)."""
    matmul = [r for r in a.rows if r.on_gpu and _is_matmul_kernel(r.name)]
    matmul += [r for r in a.rows if not r.on_gpu and r.name in _MATMUL_OPS]
    # A kernel row and the op that launched it count the same time: take the larger view.
    kernel_s = sum(r.self_gpu_s for r in matmul if r.on_gpu)
    op_s = sum(r.self_gpu_s for r in matmul if not r.on_gpu)
    names = sorted(matmul, key=lambda r: -r.self_gpu_s)
    cpu_rows = [r for r in a.rows if not r.on_gpu]
    top = max(cpu_rows, key=lambda r: r.self_cpu_s, default=None)
    biggest: tuple[str, float] | None = None
    spans = [(rng.name, rng.cpu_s) for rng in a.ranges]
    spans += [(r.name, r.self_cpu_s) for r in cpu_rows]
    if spans:
        biggest = max(spans, key=lambda item: item[1])
    return ProfileFacts(
        cuda=cuda,
        window_s=a.window_s,
        kernel_count=a.kernel_count,
        gpu_busy_s=a.gpu_busy_s,
        gpu_idle_fraction=a.gpu_idle_fraction if cuda else None,
        idle_s=dict(a.idle_s),
        syncs=a.syncs.count,
        syncs_text=a.syncs.describe() if a.syncs.count else "",
        gpu_total_s=sum(r.self_gpu_s for r in a.rows if r.on_gpu)
        or sum(r.self_gpu_s for r in a.rows),
        matmul_gpu_s=max(kernel_s, op_s),
        matmul_names=", ".join(r.name[:40] for r in names[:2]),
        autocast_on=autocast_on,
        cpu_total_s=sum(r.self_cpu_s for r in cpu_rows),
        top_cpu=(top.name, top.self_cpu_s) if top is not None else None,
        op_calls=sum(r.calls for r in cpu_rows),
        biggest_cpu_item=biggest,
        steps=a.steps,
        sync_blocked_s=a.syncs.blocked_s,
        loader_s=a.loader_s,
        loader_range=a.loader_range,
        loader_seen=a.loader_seen,
        loader_fix=a.loader_fix,
    )


def _is_matmul_kernel(name: str) -> bool:
    lowered = name.lower()
    return "gemm" in lowered or "conv" in lowered or "nvjet" in lowered


def hints(a: Analysis, *, cuda: bool, autocast_on: bool) -> list[str]:
    """At most two plain-language hints, the most telling first (the table's "profile" causes).

    With CUDA, the idle hint follows the largest share of the GPU's idle time.
    """
    if cuda and (a.gpu_busy_s is None or a.window_s <= 0):
        return []
    found = explain(
        Evidence("profile", cuda=cuda, cell=facts(a, cuda=cuda, autocast_on=autocast_on))
    )
    return [e.text for e in found[:2]]
