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
- a synchronisation is a CUDA runtime or driver call that blocks the host until the device is
  done (``cudaStreamSynchronize``, ``cudaDeviceSynchronize``, ``cudaEventSynchronize``, a
  blocking ``cudaMemcpy``). ``.item()`` on a CUDA tensor is one (a copy, then a stream sync);
  ``.item()`` on a CPU tensor has no runtime call at all, so it is not;
- the GPU's idle time is split as Holistic Trace Analysis does it (its
  ``BreakdownAnalysis._analyze_idle_time_for_stream``): a gap before a kernel whose launch call
  started after the GPU went idle waits on the host; a gap before a kernel that was already
  queued is launch overhead between kernels (under 30 µs, HTA's ``consecutive_kernel_delay``) or
  waits on something else. Time a copy or memset runs while no kernel does is idle "on copies".
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from jupyter_gpu.magics.common.causes import Evidence, ProfileFacts, explain
from jupyter_gpu.magics.common.evidence import union_length
from jupyter_gpu.magics.common.origin import is_library_file
from jupyter_gpu.magics.common.render import Bar, fmt_pct

from .rows import (
    BOOKKEEPING,
    OWN_RANGE,
    PY_EVENT,
    OpRow,
    OpTotals,
    device_kind,
    rows_from_key_averages,
)

_US = 1e-6
#: Runtime and driver calls that block the host until the device is done (CUDA 12 and 13
#: also have ``_ptsz``/``_v2`` variants, matched by prefix).
SYNC_CALLS = (
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
    "cuStreamSynchronize",
    "cuCtxSynchronize",
    "cuEventSynchronize",
)
#: Blocking copies (the ``Async`` ones do not block by themselves).
_BLOCKING_COPIES = ("cudaMemcpy", "cudaMemcpy_ptds", "cuMemcpyDtoH", "cuMemcpyDtoH_v2")
#: HTA's ``consecutive_kernel_delay``: a shorter gap before a queued kernel is launch overhead.
KERNEL_GAP_S = 30e-6
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
class Syncs:
    """Device synchronisations: how many of each call, and where in the user's code."""

    by_call: Counter[str] = field(default_factory=Counter)
    places: Counter[str] = field(default_factory=Counter)

    @property
    def count(self) -> int:
        return sum(self.by_call.values())

    def describe(self) -> str:
        """``12 device syncs (cudaStreamSynchronize x12) at cell [3] line 4 (x12)``."""
        calls = ", ".join(f"{name} x{n}" for name, n in self.by_call.most_common())
        text = f"{self.count:,} device sync(s) ({calls})"
        located = sum(self.places.values())
        if self.places:
            where = "; ".join(f"{p} (x{n})" for p, n in self.places.most_common(3))
            more = len(self.places) - 3
            text += f" at {where}" + (f" and {more} more place(s)" if more > 0 else "")
        if 0 < located < self.count:
            text += f"; {self.count - located} not traced to a line"
        return text


#: The idle categories, in the order they are listed.
IDLE_KINDS = ("host", "kernels", "copies", "other")
IDLE_LABELS = {
    "host": "waiting on the host",
    "kernels": "between kernels",
    "copies": "on copies",
    "other": "on other work",
}


@dataclass
class Analysis:
    """What the profile showed: op rows, annotation ranges, timeline, GPU idle time, hints."""

    rows: list[OpRow] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    window_s: float = 0.0
    gpu_busy_s: float | None = None
    kernel_count: int = 0
    hints: list[str] = field(default_factory=list)
    ranges: list[RangeRow] = field(default_factory=list)
    syncs: Syncs = field(default_factory=Syncs)
    #: Idle seconds per IDLE_KINDS category (empty without CUDA).
    idle_s: dict[str, float] = field(default_factory=dict)
    #: With ``stack``: whether torch recorded any Python frame (a Python-function event or a
    #: stack on an event); torch 2.11 on its own records none, and "called from" stays empty.
    python_frames: bool = False

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
        """Fraction of the profiled window with no kernel or copy running (``None``: no GPU)."""
        if self.gpu_busy_s is None or self.window_s <= 0:
            return None
        return max(0.0, 1.0 - self.gpu_busy_s / self.window_s)


def _is_python(evt: Any) -> bool:
    """A Python-function event (recorded with ``with_stack``), not an op."""
    if getattr(evt, "is_python_function", False):
        return True
    name = evt.name
    return name.startswith("<built-in") or PY_EVENT.match(name) is not None


def _gpu_kinds() -> frozenset[int]:
    """The ``device_kind`` of events drawn on a GPU lane: CUDA, PrivateUse1 and XPU."""
    from torch._C._autograd import DeviceType  # what FunctionEvent.device_type holds

    return frozenset(
        int(getattr(DeviceType, n).value)
        for n in ("CUDA", "PrivateUse1", "XPU")
        if hasattr(DeviceType, n)
    )


def place(filename: str, lineno: int, fn: str, cell_names: dict[str, int]) -> str:
    """Where in the user's code: ``cell [3] line 4 in step`` or ``train.py:12 in step``."""
    if filename in cell_names:
        # torch's stacks give a cell's module-level frame line 0: the cell alone says it
        at = f" line {lineno}" if lineno > 0 else ""
        return f"cell [{cell_names[filename]}]{at}" + ("" if fn == "<module>" else f" in {fn}")
    return f"{filename.rsplit('/', 1)[-1]}:{lineno} in {fn}"


def _user_place(evt: Any, cell_names: dict[str, int]) -> str:
    """The nearest user-code Python frame above ``evt`` ("cell [3] line 4 in step").

    From the Python-function events above it (torch 2.13 records them with ``with_stack``);
    failing those, from the stack strings of the op or of the nearest op above it that has
    them (torch 2.11 records no Python-function events, only these, and only with the
    experimental ``verbose`` option).
    """
    parents = []
    parent = evt.cpu_parent
    while parent is not None:
        parents.append(parent.name)  # ops' names never match PY_EVENT: only frames count
        parent = parent.cpu_parent
    found = stack_place(parents, cell_names)
    if found:
        return found
    node = evt
    while node is not None:
        frames = _stack(node)
        if frames:
            return stack_place(frames, cell_names)
        node = node.cpu_parent
    return ""


def _stack(evt: Any) -> list[str]:
    """``FunctionEvent.stack``: Python frames as ``file(line): fn``, innermost first."""
    return list(getattr(evt, "stack", None) or ())


def stack_place(frames: list[str], cell_names: dict[str, int]) -> str:
    """The innermost user-code frame of a stack as a place; "" if it has none.

    ``frames``: innermost first, e.g. ``["torch/nn/...(130): forward",
    "<ipython-input-3-ab>(4): step"]``.
    """
    for frame in frames:
        match = PY_EVENT.match(frame)
        if match and not is_library_file(match["file"]):
            return place(match["file"], int(match["line"]), match["fn"], cell_names)
    return ""


def _is_sync(name: str) -> bool:
    return name.startswith(SYNC_CALLS) or name in _BLOCKING_COPIES


def _under_own_range(evt: Any) -> bool:
    """Inside %%profile's own end-of-cell range (its synchronisation is not the user's)."""
    parent = evt.cpu_parent
    for _ in range(8):
        if parent is None:
            return False
        if parent.name == OWN_RANGE:
            return True
        parent = parent.cpu_parent
    return False


@dataclass
class GpuActivity:
    """A kernel, copy or memset on the GPU (seconds); ``launched``: its launch call's start."""

    start: float
    end: float
    copy: bool
    launched: float | None = None


def analyse(
    prof: Any,
    *,
    cuda: bool,
    autocast_on: bool,
    cell_names: dict[str, int],
    stack: bool = False,
    timeline: bool = True,
    sync_places: Counter[str] | None = None,
) -> Analysis:
    """Rows, ranges, syncs, timeline and hints from a stopped profiler.

    ``stack``: the profiler recorded Python stacks (syncs are placed from them); otherwise
    ``sync_places`` says where the syncs were (recorded while the cell ran). One pass over the
    events gives the per-op totals, the timeline bars (skipped without ``timeline``: nothing
    shows them), the GPU activity and the syncs. Most events are ops nested in other ops and
    need nothing but their totals, so they leave the loop first. The per-event work adds to
    torch's own parsing of the trace (the target is within 10 % of a bare profiler printing its
    table).
    """
    events = prof.events()
    gpu_kinds = _gpu_kinds()
    totals = OpTotals.for_events(events)
    analysis = Analysis()
    bars = analysis.bars
    places: dict[str, Counter[str]] = {}
    ranges: dict[str, RangeRow] = {}
    syncs = analysis.syncs
    first_start, last_end, any_top = math.inf, -math.inf, False
    activity: list[tuple[GpuActivity, int]] = []  # with the correlation id of its launch
    launches: dict[int, float] = {}
    threads: dict[int, str] = {}
    sync_events: list[tuple[float, str, Any]] = []
    own_start = math.inf
    for evt in events:
        kind = device_kind(evt)
        if totals is not None:
            try:
                totals.add(evt, kind)
            except (AttributeError, TypeError):  # an event unlike the first: torch's own sums
                totals = None
        gpu = kind in gpu_kinds
        name = evt.name
        if name in BOOKKEEPING or name == "[memory]":
            continue
        if evt.is_user_annotation:
            start, end = evt.time_range.start * _US, evt.time_range.end * _US
            if name == OWN_RANGE and not gpu:
                own_start = start
            _add_range(ranges, name, gpu, end - start)
            if not gpu and evt.cpu_parent is None and not evt.is_async:
                any_top = True  # the ops inside are not top-level: the range spans them
                first_start, last_end = min(first_start, start), max(last_end, end)
                if timeline and name != OWN_RANGE:
                    bars.append(Bar("ranges", start, end, name[:120]))
            continue
        if gpu:
            start, end = evt.time_range.start * _US, evt.time_range.end * _US
            lowered = name.lower()
            copy = "memcpy" in lowered or "memset" in lowered
            activity.append((GpuActivity(start, end, copy), evt.id))
            if timeline:
                stream = getattr(evt, "device_resource_id", None)
                lane = f"GPU {evt.device_index}" + (f" stream {stream}" if stream else "")
                bars.append(Bar(lane, start, end, name[:120]))
            if not copy:
                analysis.kernel_count += 1
            last_end = max(last_end, end)
            continue
        if name.startswith("cu"):  # a CUDA runtime or driver call
            launches[evt.id] = evt.time_range.start * _US
            if _is_sync(name) and not _under_own_range(evt):
                sync_events.append((evt.time_range.start * _US, name, evt))
        if not stack and (evt.cpu_parent is not None or evt.is_async):
            continue  # an op inside another op, or an async one: not on the timeline
        if stack and _is_python(evt):
            analysis.python_frames = True
            continue
        frames = _stack(evt) if stack else []
        if frames:
            analysis.python_frames = True
        if stack and (evt.cpu_parent is not None or frames):
            where = _user_place(evt, cell_names)
            if where:
                places.setdefault(name, Counter())[where] += 1
        top = _top_level(evt) if stack else evt.cpu_parent is None and not evt.is_async
        if top:
            start, end = evt.time_range.start * _US, evt.time_range.end * _US
            if timeline:
                lane = threads.setdefault(evt.thread, f"CPU thread {len(threads)}")
                bars.append(Bar(lane, start, end, name[:120]))
            any_top = True
            first_start, last_end = min(first_start, start), max(last_end, end)
    for start, name, evt in sync_events:
        if start >= own_start:  # after the cell: %%profile's own sync, or the profiler's
            continue
        syncs.by_call[name] += 1
        where = _user_place(evt, cell_names) if stack else ""
        if where:
            syncs.places[where] += 1
    called_from = {name: counter.most_common(1)[0][0] for name, counter in places.items()}
    if totals is not None:
        analysis.rows = totals.rows(called_from)
    else:
        analysis.rows = rows_from_key_averages(prof, called_from)
    ranges.pop(OWN_RANGE, None)
    # A name recorded as a range (record_function) is shown as a range only, even where
    # another event of that name lacks torch's annotation flag (on the H200 a training step's
    # op table still listed an "Optimizer.step#AdamW.step" row).
    analysis.rows = [row for row in analysis.rows if row.name not in ranges]
    analysis.ranges = sorted(ranges.values(), key=lambda r: -(r.gpu_s or r.cpu_s))
    if not stack and sync_places:
        syncs.places.update(sync_places)
    for act, corr in activity:
        act.launched = launches.get(corr)
    if any_top:
        analysis.window_s = last_end - first_start
    if cuda:
        on_gpu = [act for act, _ in activity]
        analysis.gpu_busy_s = union_length([(a.start, a.end) for a in on_gpu if not a.copy])
        if any_top:
            analysis.idle_s = idle_breakdown(on_gpu, first_start, last_end)
    analysis.hints = hints(analysis, cuda=cuda, autocast_on=autocast_on)
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


def _top_level(evt: Any) -> bool:
    """An op with no op above it (Python-function events of ``with_stack`` do not count)."""
    parent = evt.cpu_parent
    while parent is not None:
        if not _is_python(parent):
            return False
        parent = parent.cpu_parent
    return not getattr(evt, "is_async", False)


def facts(a: Analysis, *, cuda: bool, autocast_on: bool) -> ProfileFacts:
    """What the table of causes reads from this analysis (``common/causes/``)."""
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
