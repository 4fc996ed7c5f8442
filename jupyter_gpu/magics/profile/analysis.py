"""Turn a finished ``torch.profiler.profile`` into rows, a timeline, the GPU idle time and hints.

Reads only what torch 2.4+ profilers have in common: ``events()`` (``FunctionEvent``: ``name``,
``time_range``, ``device_type``, ``cpu_parent``, ``is_python_function``, ``thread``,
``device_index``), and ``key_averages()`` where the events lack a field ``_profile_rows`` reads.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from jupyter_gpu.magics.common.render import Bar, fmt_pct
from jupyter_gpu.measure import fmt_seconds

from .rows import PY_EVENT, OpRow, OpTotals, device_kind, rows_from_key_averages

_US = 1e-6
_SYNC_OPS = (
    "aten::item",
    "aten::_local_scalar_dense",
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
)
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
_LIBRARY = (
    "/torch/",
    "\\torch\\",
    "site-packages",
    "/IPython/",
    "/ipykernel/",
    "<frozen",
    "<built-in",
)
_LIBRARY_START = ("torch/", "torch\\", "<built-in")


@dataclass
class Analysis:
    """What the profile showed: op rows, timeline bars, GPU busy time, hints."""

    rows: list[OpRow] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    window_s: float = 0.0
    gpu_busy_s: float | None = None
    kernel_count: int = 0
    hints: list[str] = field(default_factory=list)

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


def _is_library(filename: str) -> bool:
    """Python frames of torch or other installed packages (profiler paths can be relative)."""
    return filename.startswith(_LIBRARY_START) or any(m in filename for m in _LIBRARY)


def _gpu_kinds() -> frozenset[int]:
    """The ``device_kind`` of events drawn on a GPU lane: CUDA, PrivateUse1 and XPU."""
    from torch._C._autograd import DeviceType  # what FunctionEvent.device_type holds

    return frozenset(
        int(getattr(DeviceType, n).value)
        for n in ("CUDA", "PrivateUse1", "XPU")
        if hasattr(DeviceType, n)
    )


def _user_place(evt: Any, cell_names: dict[str, int]) -> str:
    """The nearest user-code Python frame above ``evt`` ("cell [3] line 4 in step")."""
    parent = evt.cpu_parent
    while parent is not None:
        match = PY_EVENT.match(parent.name)
        if match and not _is_library(match["file"]):
            file, line, fn = match["file"], match["line"], match["fn"]
            if file in cell_names:
                return f"cell [{cell_names[file]}] line {line}" + (
                    "" if fn == "<module>" else f" in {fn}"
                )
            return f"{file.rsplit('/', 1)[-1]}:{line} in {fn}"
        parent = parent.cpu_parent
    return ""


def analyse(
    prof: Any,
    *,
    cuda: bool,
    autocast_on: bool,
    cell_names: dict[str, int],
    stack: bool = False,
    timeline: bool = True,
) -> Analysis:
    """Rows, timeline and hints from a stopped profiler (``stack``: it recorded Python stacks).

    One pass over the events gives the per-op totals, the timeline bars (skipped without
    ``timeline``: nothing shows them), the GPU busy time and the kernel count. Most events are
    ops nested in other ops and need nothing but their totals, so they leave the loop first.
    The per-event work adds to torch's own parsing of the trace (the target is within 10 % of
    a bare profiler printing its table).
    """
    events = prof.events()
    gpu_kinds = _gpu_kinds()
    totals = OpTotals.for_events(events)
    analysis = Analysis()
    bars = analysis.bars
    places: dict[str, Counter[str]] = {}
    first_start, last_end, any_top = math.inf, -math.inf, False
    gpu_intervals: list[tuple[float, float]] = []
    threads: dict[int, str] = {}
    for evt in events:
        kind = device_kind(evt)
        if totals is not None:
            try:
                totals.add(evt, kind)
            except (AttributeError, TypeError):  # an event unlike the first: torch's own sums
                totals = None
        gpu = kind in gpu_kinds
        if not (gpu or stack) and (evt.cpu_parent is not None or evt.is_async):
            continue  # an op inside another op, or an async one: not on the timeline
        name = evt.name
        if name == "[memory]" or (stack and _is_python(evt)):
            continue
        start, end = evt.time_range.start * _US, evt.time_range.end * _US
        if gpu:
            gpu_intervals.append((start, end))
            if timeline:
                stream = getattr(evt, "device_resource_id", None)
                lane = f"GPU {evt.device_index}" + (f" stream {stream}" if stream else "")
                bars.append(Bar(lane, start, end, name[:120]))
            lowered = name.lower()
            if "memcpy" not in lowered and "memset" not in lowered:
                analysis.kernel_count += 1
            last_end = max(last_end, end)
            continue
        if stack and evt.cpu_parent is not None:
            place = _user_place(evt, cell_names)
            if place:
                places.setdefault(name, Counter())[place] += 1
        top = _top_level(evt) if stack else evt.cpu_parent is None and not evt.is_async
        if top:
            if timeline:
                lane = threads.setdefault(evt.thread, f"CPU thread {len(threads)}")
                bars.append(Bar(lane, start, end, name[:120]))
            any_top = True
            first_start, last_end = min(first_start, start), max(last_end, end)
    called_from = {name: counter.most_common(1)[0][0] for name, counter in places.items()}
    if totals is not None:
        analysis.rows = totals.rows(called_from)
    else:
        analysis.rows = rows_from_key_averages(prof, called_from)
    if any_top:
        analysis.window_s = last_end - first_start
    if cuda:
        analysis.gpu_busy_s = _union_length(gpu_intervals)
    analysis.hints = hints(analysis, cuda=cuda, autocast_on=autocast_on)
    return analysis


def _top_level(evt: Any) -> bool:
    """An op with no op above it (Python-function events of ``with_stack`` do not count)."""
    parent = evt.cpu_parent
    while parent is not None:
        if not _is_python(parent):
            return False
        parent = parent.cpu_parent
    return not getattr(evt, "is_async", False)


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, current_start, current_end = 0.0, None, None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None and current_start is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None and current_start is not None:
        total += current_end - current_start
    return total


def hints(a: Analysis, *, cuda: bool, autocast_on: bool) -> list[str]:
    """At most two plain-language hints, the most telling first."""
    out: list[str] = []
    by_name = {r.name: r for r in a.rows}
    syncs = sum(by_name[n].calls for n in _SYNC_OPS if n in by_name)
    if cuda and a.gpu_busy_s is not None and a.window_s > 0:
        idle = a.gpu_idle_fraction or 0.0
        gpu_total = sum(r.self_gpu_s for r in a.rows)
        mean_kernel = a.gpu_busy_s / a.kernel_count if a.kernel_count else 0.0
        copies = sum(r.self_gpu_s for r in a.rows if "Memcpy HtoD" in r.name)
        if a.kernel_count == 0:
            out.append(
                "No GPU kernel ran in this cell: the work stayed on the CPU "
                "(check that the model and the data are on 'cuda')."
            )
        elif idle >= 0.5 and a.kernel_count >= 100 and mean_kernel < 20e-6:
            out.append(
                f"Launch-bound: {a.kernel_count:,} kernels of {fmt_seconds(mean_kernel)} on "
                f"average, and the GPU was idle {fmt_pct(idle)} of the time waiting for the CPU to "
                "launch them. Try %compile NAME --mode reduce-overhead (CUDA graphs), fuse work "
                "with torch.compile, or use a larger batch."
            )
        elif idle >= 0.5 and copies > 0.2 * max(gpu_total, 1e-12):
            out.append(
                f"The GPU was idle {fmt_pct(idle)} of the time and host-to-device copies took "
                f"{fmt_seconds(copies)}: use pin_memory=True in the DataLoader and "
                ".to('cuda', non_blocking=True)."
            )
        elif idle >= 0.5:
            out.append(
                f"The GPU was idle {fmt_pct(idle)} of the time: it waits for the CPU. In a "
                "training loop, look at the DataLoader (num_workers, pin_memory=True, "
                "persistent_workers) and at Python work between steps."
            )
        if syncs >= 10:
            out.append(
                f"{syncs:,} CPU-GPU synchronisations (.item(), .cpu(), print of a CUDA tensor): "
                "each one stalls the launch queue. Log a loss every N steps instead of every step."
            )
        matmul = sum(r.self_gpu_s for r in a.rows if r.name in _MATMUL_OPS or "gemm" in r.name)
        if not autocast_on and gpu_total > 0 and matmul > 0.4 * gpu_total:
            out.append(
                f"Matmuls and convolutions take {fmt_pct(matmul / gpu_total)} of GPU time and "
                "autocast was off: %amp on (bf16) or %amp tf32 on usually makes them much faster."
            )
    else:
        cpu_total = sum(r.self_cpu_s for r in a.rows)
        top = max(a.rows, key=lambda r: r.self_cpu_s, default=None)
        if top is not None and cpu_total > 0 and top.self_cpu_s >= 0.3 * cpu_total:
            out.append(
                f"No GPU profiled: {top.name} takes {fmt_pct(top.self_cpu_s / cpu_total)} of the "
                "CPU time in ops."
            )
        calls = sum(r.calls for r in a.rows)
        if calls >= 1000 and cpu_total / calls < 10e-6:
            out.append(
                f"{calls:,} op calls of {fmt_seconds(cpu_total / calls)} on average: per-op "
                "overhead dominates; larger tensors per call or torch.compile would help."
            )
    return out[:2]
