"""``%%memsummary --snapshot``: the allocator's history over a cell, as a timeline.

torch records every allocation and free (``torch.cuda.memory._record_memory_history``); its own
viewer (pytorch.org/memory_viz) loads its JavaScript from the web. Here the trace becomes a
plotly figure (allocated and reserved bytes over time, each step labelled with its size and
the user source line that made it) and a table of what was alive at the peak, grouped by
source line. Works offline; the figure keeps at most a few thousand points.
"""

from __future__ import annotations

import contextlib
import inspect
import linecache
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from jupyter_gpu.magics.output.render import Table, fmt_bytes, line_svg
from jupyter_gpu.magics.shell.lazy_torch import torch_module

_LIBRARY_MARKERS = ("/torch/", "\\torch\\", "site-packages", "<frozen", "/IPython/", "/ipykernel/")


@dataclass(frozen=True)
class TimelinePoint:
    """The allocated/reserved bytes after one allocator event, at ``t_s`` seconds."""

    t_s: float
    allocated_bytes: int
    reserved_bytes: int
    action: str
    size_bytes: int
    where: str


@dataclass
class MemoryTimeline:
    """The allocator's history over one cell on one device."""

    device: int
    points: list[TimelinePoint] = field(default_factory=list)
    peak_bytes: int = 0
    peak_t_s: float = 0.0
    alive_at_peak: list[tuple[str, int, int]] = field(default_factory=list)  # where, bytes, count
    events: int = 0
    timed: bool = True  # False: the trace has no timestamps and x is the event number

    def __repr__(self) -> str:
        return (
            f"<MemoryTimeline device {self.device}: {self.events} events, "
            f"peak {fmt_bytes(self.peak_bytes)}>"
        )


@contextlib.contextmanager
def recording(max_entries: int) -> Iterator[bool]:
    """Record the allocator's history in the block; yields False if it was already on.

    A recording the user started themselves is left running; ours always stops, even if the
    block raises.
    """
    torch_module()  # the UsageError that says how to install torch, where it is missing
    import torch

    memory = torch.cuda.memory
    is_on = getattr(torch._C, "_cuda_isHistoryEnabled", None)
    already = bool(is_on()) if is_on is not None else False
    if not already:
        kwargs: dict[str, Any] = {
            "context": "alloc",
            "stacks": "python",
            "max_entries": max_entries,
        }
        params = inspect.signature(memory._record_memory_history).parameters
        if "clear_history" in params:
            kwargs["clear_history"] = True
        memory._record_memory_history("all", **kwargs)
    try:
        yield not already
    finally:
        if not already:
            memory._record_memory_history(None)


def where_from_frames(frames: list[dict[str, Any]], cell_names: dict[str, int]) -> str:
    """The first frame in user code, as "cell [7] line 3: <source>" or "file.py:42 in fn"."""
    for frame in frames:
        filename = str(frame.get("filename", ""))
        if any(marker in filename for marker in _LIBRARY_MARKERS) or not filename:
            continue
        line = int(frame.get("line", 0))
        source = linecache.getline(filename, line).strip()
        if filename in cell_names:
            place = f"cell [{cell_names[filename]}] line {line}"
        else:
            place = f"{filename.rsplit('/', 1)[-1]}:{line} in {frame.get('name', '?')}"
        return f"{place}: {source}" if source else place
    return "(inside torch)"


def build_timeline(
    snapshot: dict[str, Any],
    device: int,
    base_allocated: int,
    base_reserved: int,
    cell_names: dict[str, int],
) -> MemoryTimeline:
    """Replay the snapshot's trace for ``device`` from the allocated/reserved bytes before it."""
    traces = snapshot.get("device_traces", [])
    trace: list[dict[str, Any]] = traces[device] if device < len(traces) else []
    timeline = MemoryTimeline(device=device, events=len(trace))
    if not trace:
        return timeline
    start_us = trace[0].get("time_us")
    timeline.timed = start_us is not None
    allocated, reserved = base_allocated, base_reserved
    peak, peak_index = allocated, -1
    where_cache: dict[int, str] = {}
    for i, event in enumerate(trace):
        action = str(event.get("action"))
        size = int(event.get("size", 0))
        if action == "alloc":
            allocated += size
        elif action == "free_completed":
            allocated -= size
        elif action == "segment_alloc":
            reserved += size
        elif action == "segment_free":
            reserved -= size
        else:
            continue
        t_us = event.get("time_us")
        t_s = (t_us - start_us) / 1e6 if t_us is not None and start_us is not None else float(i)
        where = ""
        if action == "alloc":
            where = where_from_frames(event.get("frames", []), cell_names)
            where_cache[int(event.get("addr", 0))] = where
        elif action == "free_completed":
            where = where_cache.get(int(event.get("addr", 0)), "")
        timeline.points.append(TimelinePoint(t_s, allocated, reserved, action, size, where))
        if allocated > peak:
            peak, peak_index = allocated, i
    timeline.peak_bytes = peak
    if peak_index >= 0:
        timeline.peak_t_s = next(
            p.t_s for p in timeline.points if p.allocated_bytes == peak and p.action == "alloc"
        )
        timeline.alive_at_peak = _alive_at(trace[: peak_index + 1], cell_names)
    return timeline


def _alive_at(
    trace: list[dict[str, Any]], cell_names: dict[str, int]
) -> list[tuple[str, int, int]]:
    """Blocks allocated during the cell and still alive at the end of ``trace``, by source line."""
    live: dict[int, tuple[int, list[dict[str, Any]]]] = {}
    for event in trace:
        action = event.get("action")
        addr = int(event.get("addr", 0))
        if action == "alloc":
            live[addr] = (int(event.get("size", 0)), event.get("frames", []))
        elif action == "free_completed":
            live.pop(addr, None)
    by_where: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for size, frames in live.values():
        entry = by_where[where_from_frames(frames, cell_names)]
        entry[0] += size
        entry[1] += 1
    ranked = sorted(by_where.items(), key=lambda kv: kv[1][0], reverse=True)
    return [(where, total, count) for where, (total, count) in ranked]


def timeline_figure(timeline: MemoryTimeline, *, max_points: int = 4000) -> dict[str, Any]:
    """Plotly spec: allocated and reserved (MiB) over time, hover: event, size, source line."""
    points = timeline.points
    step = max(1, len(points) // max_points)
    kept = points[::step]
    if points and kept[-1] is not points[-1]:
        kept.append(points[-1])
    peak = next((p for p in points if p.allocated_bytes == timeline.peak_bytes), None)
    if peak is not None and peak not in kept:
        kept.append(peak)
        kept.sort(key=lambda p: p.t_s)
    xs = [round(p.t_s * 1e3, 4) if timeline.timed else p.t_s for p in kept]
    mib = 1024 * 1024
    hover = [f"{p.action} {fmt_bytes(p.size_bytes)}<br>{p.where}" for p in kept]
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "line": {"shape": "hv", "width": 1.5},
            "name": "allocated",
            "x": xs,
            "y": [round(p.allocated_bytes / mib, 3) for p in kept],
            "text": hover,
            "hovertemplate": "%{y:.1f} MiB allocated<br>%{text}<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "line": {"shape": "hv", "width": 1, "dash": "dot"},
            "name": "reserved",
            "x": xs,
            "y": [round(p.reserved_bytes / mib, 3) for p in kept],
            "hovertemplate": "%{y:.1f} MiB reserved<extra></extra>",
        },
    ]
    title = (
        f"CUDA memory over the cell (device {timeline.device}): peak "
        f"{fmt_bytes(timeline.peak_bytes)} allocated, {timeline.events:,} allocator events"
    )
    if step > 1:
        title += f" (every {step}th shown)"
    layout = {
        "title": {"text": title},
        "xaxis": {
            "title": {"text": "time in the cell (ms)" if timeline.timed else "allocator event"}
        },
        "yaxis": {"title": {"text": "MiB"}, "rangemode": "tozero"},
        "height": 360,
        "margin": {"l": 60, "r": 20, "t": 50, "b": 40},
        "legend": {"orientation": "h"},
    }
    return {"data": data, "layout": layout, "config": {"displaylogo": False}}


def timeline_svg(timeline: MemoryTimeline) -> str:
    """A static sketch of the allocated-bytes line, for HTML exports."""
    return line_svg(
        [p.t_s for p in timeline.points], [float(p.allocated_bytes) for p in timeline.points]
    )


def alive_table(timeline: MemoryTimeline, top: int = 10) -> Table:
    """The allocations made in the cell and alive at its peak, by user source line."""
    table = Table(
        headers=["alive at the peak", "bytes", "blocks"],
        numeric=[False, True, True],
        title=f"allocated in the cell and alive at its peak ({fmt_bytes(timeline.peak_bytes)})",
    )
    for where, total, count in timeline.alive_at_peak[:top]:
        table.rows.append([where[:100], fmt_bytes(total), str(count)])
    return table
