"""Why compiled code is slower, or no faster: one line per cause torch knows, each with its fix.

Causes, from what the run recorded (never from guesses about the model):

- CUDA graphs skipped (``reduce-overhead``), with torch's own reason;
- recompiles and graph breaks (from the compile report);
- TF32 off for float32 matmuls (``torch.get_float32_matmul_precision() == "highest"``);
- a launch-bound step: a profile of one compiled call shows the GPU busy a small part of the
  step, the rest launching kernels; ``reduce-overhead`` would replay them as one CUDA graph,
  and the step would come near the GPU's own time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jupyter_gpu.magics.common.lazy_torch import torch_if_imported
from jupyter_gpu.measure import fmt_seconds

if TYPE_CHECKING:
    from .dynamo_watch import CompileReport

#: torch's skip reasons, matched by a phrase, and what to do about each.
_SKIP_FIXES = (
    (
        "mutated inputs",
        "the compiled code changes a tensor it did not create (an in-place update of an "
        "input, a global or a buffer): return the new value instead, or keep the update "
        "outside the compiled function",
    ),
    (
        "cpu device",
        "a tensor on the CPU takes part in the graph: move it to the GPU (a Python number is fine)",
    ),
    ("multiple devices", "the graph uses more than one device: keep it on one GPU"),
    (
        "incompatible op",
        "an op in the graph cannot be captured in a CUDA graph (e.g. one that syncs): move it "
        "out of the compiled function",
    ),
    (
        "dynamic shape",
        "shapes change from call to call: keep them fixed (pad the last batch) or mark them "
        "with torch._dynamo.mark_static",
    ),
    (
        "non-static",
        "inputs whose memory address changes cannot be replayed: keep them in fixed tensors "
        "and copy new data in",
    ),
)
_LAUNCH_BOUND_BUSY = 0.5  # the GPU busy less than this share of the step
_LAUNCH_BOUND_KERNELS = 20


@dataclass(frozen=True)
class Explanation:
    """One cause and its fix in a sentence.

    ``kind``: cudagraphs, recompiles, graph_breaks, tf32, launch_bound, or none.
    """

    kind: str
    text: str


def _skip_fix(reason: str) -> str:
    lowered = reason.lower()
    for phrase, fix in _SKIP_FIXES:
        if phrase in lowered:
            return fix
    return "see torch's reason; TORCH_LOGS=cudagraphs prints where it was found"


def from_report(report: CompileReport, options: dict[str, Any] | None = None) -> list[Explanation]:
    """The causes a compile report shows (CUDA graphs skipped, recompiles, graph breaks)."""
    out = [
        Explanation(
            "cudagraphs",
            f"CUDA graphs skipped: {reason} (torch's reason). Without them reduce-overhead "
            f"launches every kernel as eager code does. Fix: {_skip_fix(reason)}.",
        )
        for reason in report.cudagraph_skips
    ]
    if report.recompiles:
        first = report.recompiles[0]
        out.append(
            Explanation(
                "recompiles",
                f"{len(report.recompiles)} recompile(s) ({first.function}: "
                f"{first.reason.splitlines()[0][:120]}): each costs a compile and the guards "
                "grow. Keep shapes and Python values the same from call to call, or pass "
                "--dynamic for shapes that must change.",
            )
        )
    if report.graph_break_count:
        out.append(
            Explanation(
                "graph_breaks",
                f"{report.graph_break_count} graph break(s): the code runs as "
                f"{report.graphs + 1 if report.graphs else 'several'} pieces with Python in "
                "between, and nothing fuses across a break. The report above names each line; "
                "--fullgraph turns a break into an error that points at it.",
            )
        )
    return out


def tf32_off(eager: Any) -> Explanation | None:
    """TF32 off while float32 matmuls run on a GPU that has TF32 tensor cores."""
    torch = torch_if_imported()
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    if torch.get_float32_matmul_precision() != "highest":
        return None
    if torch.cuda.get_device_capability() < (8, 0) or torch.is_autocast_enabled("cuda"):
        return None
    params = getattr(eager, "parameters", None)
    if callable(params) and not any(p.dtype == torch.float32 for p in params()):
        return None
    return Explanation(
        "tf32",
        "TF32 is off: float32 matmuls run in full precision, in eager and compiled code alike, "
        "so compiling cannot speed them up. %amp tf32 on (or "
        "torch.set_float32_matmul_precision('high')) runs them on tensor cores, often several "
        "times faster; %amp on (bf16) more still.",
    )


@dataclass(frozen=True)
class GpuTime:
    """One profiled call: kernels launched and the GPU's busy time (seconds)."""

    kernels: int
    busy_s: float


def profile_call(run: Callable[[], Any]) -> GpuTime | None:
    """Profile one call on the GPU (kernels only): ``None`` without CUDA or if it fails."""
    torch = torch_if_imported()
    if torch is None or not torch.cuda.is_available() or torch.autograd._profiler_enabled():
        return None
    from jupyter_gpu.magics.profile.analysis import _union_length

    activities = [torch.profiler.ProfilerActivity.CUDA]
    try:
        with torch.profiler.profile(activities=activities) as prof:
            run()
            torch.cuda.synchronize()
        intervals = []
        for evt in prof.events():
            name = evt.name.lower()
            if evt.is_user_annotation or "memcpy" in name or "memset" in name:
                continue
            if str(evt.device_type).endswith("CUDA"):
                intervals.append((evt.time_range.start * 1e-6, evt.time_range.end * 1e-6))
    except RuntimeError:  # a profiler that cannot start here: no launch-bound verdict
        return None
    return GpuTime(len(intervals), _union_length(intervals))


def launch_bound(gpu: GpuTime | None, step_s: float, mode: str | None) -> Explanation | None:
    """The step waits on kernel launches: the GPU is busy a small part of it."""
    if gpu is None or step_s <= 0 or gpu.kernels < _LAUNCH_BOUND_KERNELS:
        return None
    if gpu.busy_s >= _LAUNCH_BOUND_BUSY * step_s:
        return None
    busy = gpu.busy_s / step_s
    if mode in ("reduce-overhead", "max-autotune"):
        text = (
            f"Launch-bound: the GPU is busy {busy:.0%} of the {fmt_seconds(step_s)} step "
            f"({gpu.kernels} kernels); CUDA graphs are on in this mode, so the rest is Python "
            "and guards around the graph: a larger batch per call amortises it."
        )
    else:
        text = (
            f"Launch-bound: the GPU is busy {fmt_seconds(gpu.busy_s)} of the "
            f"{fmt_seconds(step_s)} step ({busy:.0%}, {gpu.kernels} kernels); the rest is "
            "launching them. --mode reduce-overhead replays the step as one CUDA graph: it "
            f"could come near {fmt_seconds(gpu.busy_s)} a step (up to "
            f"{step_s / max(gpu.busy_s, 1e-9):.1f}x faster). A larger batch helps too."
        )
    return Explanation("launch_bound", text)


def no_known_cause(speedup: float) -> Explanation:
    """Said when compiled is slower or no faster and torch recorded no cause."""
    return Explanation(
        "none",
        f"torch recorded no cause (no skipped CUDA graphs, recompiles nor breaks; "
        f"{speedup:.2f}x): at this size the work is already a few large kernels "
        "(matmuls) that compiling cannot fuse further; the gain shows on models with many "
        "small elementwise ops.",
    )
