"""A profile laid out by hand, as torch's events (for ``analyse``) and as a Chrome trace (for HTA).

One description, two renderings of the same events: ``events()`` gives torch's own
``FunctionEvent`` list (what ``prof.events()`` returns, with its tree built) and ``chrome()`` the
JSON that ``prof.export_chrome_trace`` writes (kineto's format: ``cpu_op``, ``user_annotation``,
``cuda_runtime`` and ``kernel`` events, launches and kernels tied by ``correlation``), which
Holistic Trace Analysis reads. Times are in microseconds.

``ground_truth_loop`` lays out the loop ``benchmarks/idle_ground_truth.py`` runs on a GPU: per
step a kernel of ``kernel_us``, a ``cudaDeviceSynchronize`` that returns when it ends, and
``host_us`` of host work (a sleep) before the next step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch._C._autograd import DeviceType
from torch.autograd.profiler_util import EventList, FunctionEvent

CPU_TID = 1
STREAM = 7


@dataclass
class Span:
    """One event: its category in kineto's terms, name, start and end (µs), correlation."""

    cat: str
    name: str
    start: float
    end: float
    corr: int
    step: int | None = None


@dataclass
class SyntheticTrace:
    """Events added in any order; rendered for torch and for HTA."""

    spans: list[Span] = field(default_factory=list)
    _next: int = 1

    def _id(self) -> int:
        self._next += 1
        return self._next

    def step(self, number: int, start: float, end: float) -> None:
        """A ``ProfilerStep#number`` range on the CPU (what ``profile.step()`` opens)."""
        self.spans.append(Span("user_annotation", "ProfilerStep#", start, end, self._id(), number))

    def cpu(self, name: str, start: float, end: float, cat: str = "cpu_op") -> None:
        self.spans.append(Span(cat, name, start, end, self._id()))

    def launch(
        self, at: float, runs: tuple[float, float], name: str = "kernel", call_us: float = 4.0
    ) -> None:
        """A ``cudaLaunchKernel`` at ``at`` and the kernel it queued, running over ``runs``."""
        corr = self._id()
        self.spans.append(Span("cuda_runtime", "cudaLaunchKernel", at, at + call_us, corr))
        cat = "gpu_memcpy" if "Memcpy" in name else "kernel"
        self.spans.append(Span(cat, name, runs[0], runs[1], corr))

    def sync(self, start: float, end: float) -> None:
        self.spans.append(Span("cuda_runtime", "cudaDeviceSynchronize", start, end, self._id()))

    # ------------------------------------------------------------------ renderings

    def events(self) -> EventList:
        """torch's ``FunctionEvent`` objects, as ``prof.events()`` gives them (tree built)."""
        events = []
        for s in sorted(self.spans, key=lambda s: (s.start, -s.end)):
            kw: dict[str, Any] = {"use_device": "cuda", "stack": []}
            gpu = s.cat in ("kernel", "gpu_memcpy")
            name = s.name
            if s.step is not None:  # torch names it ProfilerStep*, its trace name keeps the number
                name = "ProfilerStep*"
                kw["trace_name"] = f"ProfilerStep#{s.step}"
            if gpu:
                kw |= {"device_type": DeviceType.CUDA, "device_resource_id": STREAM}
            kw["is_user_annotation"] = s.cat == "user_annotation"
            events.append(
                FunctionEvent(s.corr, name, STREAM if gpu else CPU_TID, s.start, s.end, **kw)
            )
        listed = EventList(events, use_device="cuda")
        listed._build_tree()
        return listed

    def chrome(self) -> dict[str, Any]:
        """The Chrome trace ``prof.export_chrome_trace`` would write for these events."""
        out = []
        for s in self.spans:
            gpu = s.cat in ("kernel", "gpu_memcpy")
            args: dict[str, Any] = {"External id": s.corr}
            if s.cat == "cuda_runtime" or gpu:
                args["correlation"] = s.corr
            if gpu:
                args |= {"device": 0, "context": 1, "stream": STREAM}
            out.append(
                {
                    "ph": "X",
                    "cat": s.cat,
                    "name": f"ProfilerStep#{s.step}" if s.step is not None else s.name,
                    "pid": 0 if gpu else 100,
                    "tid": STREAM if gpu else CPU_TID,
                    "ts": 1_000_000.0 + s.start,
                    "dur": s.end - s.start,
                    "args": args,
                }
            )
        return {
            "schemaVersion": 1,
            "distributedInfo": {"rank": 0},
            "deviceProperties": [],
            "traceEvents": out,
        }

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.chrome()))
        return path


def ground_truth_loop(
    steps: int,
    kernel_us: float,
    host_us: float,
    *,
    warmup: int = 1,
    closing_sync_us: float = 50.0,
) -> tuple[SyntheticTrace, float]:
    """The ground-truth loop over ``warmup`` + ``steps`` runs; (trace, true idle share).

    Each run: a launch at the step's start, the kernel 6 µs later, a synchronize that returns
    2 µs after the kernel ends, ``host_us`` of host work, the step's range ending 1 µs later and
    the next starting 1 µs after that. Only the measured steps are recorded (as kineto records
    only its active steps); the profiler's own closing synchronize follows the last step. The
    true idle share is one step period less the kernel, over the period.
    """
    trace = SyntheticTrace()
    period = 6.0 + kernel_us + 2.0 + host_us + 1.0 + 1.0
    for run in range(warmup, warmup + steps):
        t = run * period
        trace.step(run, t, t + period - 1.0)
        trace.launch(t, (t + 6.0, t + 6.0 + kernel_us), name="sleep_kernel")
        trace.sync(t + 5.0, t + 8.0 + kernel_us)
    end = (warmup + steps) * period
    trace.sync(end, end + closing_sync_us)  # torch.autograd.profiler.profile.__exit__'s own
    return trace, (period - kernel_us) / period
