"""The one table of causes behind every "Why:" and "Hint:" line the measuring magics print.

Each cause is a trigger, a predicate over what one run measured (:class:`Evidence`), and a
sentence that quotes those figures. A cause is never named because it is likely: TF32 only
when float32 matmuls ran among the profiled ops, launch- or guard-bound only beside the
measured GPU busy time, a graph break with its line, a recompile with its guard. When nothing
fires, the "no cause found" line gives the figures instead.

The questions the table answers:

- ``bench``: why is the compiled code slower, or less than 10 % faster (``%compile --bench``)?
- ``report``: what in a compile report stands in the way (a later cell's compile)?
- ``amp``: why is reduced precision no faster (``%amp compare``)?
- ``profile``: where did a profiled cell's time go (``%%profile``'s hints)?

Fixes (``--mode reduce-overhead``, ``%amp tf32 on``) follow a cause; they are torch's remedies
for what was measured, not guesses about what was not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from jupyter_gpu.measure import fmt_seconds

from .evidence import CallProfile
from .quiet import PENDING_BACKWARD
from .render import fmt_pct

#: A cause fires when the GPU (or the compiled graph) is busy less than this share of a call.
OVERHEAD_SHARE = 0.5
#: Matmul-bound: matmuls and convolutions take at least this share of the busy time.
MATMUL_SHARE = 0.5
#: TF32 is named when float32 matmuls take at least this share of the GPU's busy time.
TF32_SHARE = 0.25
#: Reduced precision has little to speed up below this matmul share of the step.
FEW_MATMULS_SHARE = 0.3
#: Autocast's casts are named above this share of the reduced-precision step's busy time.
CASTS_SHARE = 0.25


@dataclass(frozen=True)
class Explanation:
    """One cause (``kind``) and its sentence."""

    kind: str
    text: str


@dataclass(frozen=True)
class GraphBreakFact:
    """One graph break: where in the user's code, its source line, dynamo's reason."""

    where: str
    source: str
    reason: str


@dataclass(frozen=True)
class CompileFacts:
    """What a compile report recorded (``compile/dynamo_watch.py``'s ``CompileReport``)."""

    graphs: int = 0
    graph_break_count: int = 0
    graph_breaks: tuple[GraphBreakFact, ...] = ()
    recompiles: tuple[tuple[str, str], ...] = ()  # (function, the guard that failed)
    cudagraph_skips: tuple[str, ...] = ()


@dataclass(frozen=True)
class Precision:
    """TF32 while the code ran, and whether the GPU has TF32 tensor cores (Ampere on)."""

    tf32_matmul: bool
    tf32_conv: bool
    tf32_hardware: bool


@dataclass(frozen=True)
class ModeFacts:
    """One ``%amp compare`` mode: its step time and a profile of one step."""

    time_s: float
    profile: CallProfile | None = None


@dataclass(frozen=True)
class ProfileFacts:
    """What ``%%profile`` measured over a cell (seconds; see ``profile/analysis.py``)."""

    cuda: bool
    window_s: float
    kernel_count: int = 0
    gpu_busy_s: float | None = None
    gpu_idle_fraction: float | None = None
    idle_s: dict[str, float] = field(default_factory=dict)
    syncs: int = 0
    syncs_text: str = ""
    gpu_total_s: float = 0.0
    matmul_gpu_s: float = 0.0
    matmul_names: str = ""
    autocast_on: bool = False
    cpu_total_s: float = 0.0
    top_cpu: tuple[str, float] | None = None  # (op, self CPU seconds)
    op_calls: int = 0
    #: The largest CPU span among the ranges and top-level ops (name, seconds).
    biggest_cpu_item: tuple[str, float] | None = None


@dataclass(frozen=True)
class Evidence:
    """What one run of a magic measured; each cause reads the fields it needs."""

    question: str
    cuda: bool = False
    # bench: per-call medians, the compile, a profile of the compiled call
    eager_s: float | None = None
    compiled_s: float | None = None
    mode: str | None = None
    compile: CompileFacts | None = None
    pending_backward: bool = False
    profile: CallProfile | None = None
    precision: Precision | None = None
    # amp: per mode
    modes: dict[str, ModeFacts] = field(default_factory=dict)
    # profile
    cell: ProfileFacts | None = None


@dataclass(frozen=True)
class Cause:
    """One row of the table: which questions it answers, its trigger and its sentence."""

    kind: str
    questions: frozenset[str]
    trigger: Callable[[Evidence], bool]
    sentence: Callable[[Evidence], str]


# ---------------------------------------------------------------------- compile report

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


def _skip_fix(reason: str) -> str:
    lowered = reason.lower()
    for phrase, fix in _SKIP_FIXES:
        if phrase in lowered:
            return fix
    return "see torch's reason; TORCH_LOGS=cudagraphs prints where it was found"


def _cudagraphs(ev: Evidence) -> str:
    c = ev.compile
    assert c is not None
    reasons = "; ".join(c.cudagraph_skips)
    return (
        f"CUDA graphs skipped: {reasons} (torch's reason). Without them reduce-overhead "
        f"launches every kernel as eager code does. Fix: {_skip_fix(c.cudagraph_skips[0])}."
    )


def _recompiles(ev: Evidence) -> str:
    c = ev.compile
    assert c is not None
    function, reason = c.recompiles[0]
    return (
        f"{len(c.recompiles)} recompile(s); the first guard that failed: {function}: "
        f"{reason.splitlines()[0][:160]}. Each recompile costs a compile and adds guards to "
        "check. Keep shapes and Python values the same from call to call, or pass --dynamic "
        "for shapes that must change."
    )


def _graph_breaks(ev: Evidence) -> str:
    c = ev.compile
    assert c is not None
    first = c.graph_breaks[0] if c.graph_breaks else None
    at = ""
    if first is not None:
        source = f": {first.source}" if first.source else ""
        at = f", the first at {first.where}{source} ({first.reason[:120]})"
    pieces = f"{c.graphs} graph(s)" if c.graphs else "several pieces"
    return (
        f"{c.graph_break_count} graph break(s){at}: the code runs as {pieces} with Python in "
        "between, and nothing fuses across a break. --fullgraph turns a break into an error "
        "that points at it."
    )


# ---------------------------------------------------------------------- bench: the profile


def _overhead(ev: Evidence) -> bool:
    p, call = ev.profile, ev.compiled_s
    if p is None or not call:
        return False
    if p.cuda and p.gpu_busy_s is not None:
        return p.gpu_busy_s < OVERHEAD_SHARE * call
    if p.region_s is None:
        return False
    graph = p.graph_s if p.graph_s is not None else p.work_s
    return graph < OVERHEAD_SHARE * ((p.guard_s or 0.0) + p.region_s)


def _overhead_text(ev: Evidence) -> str:
    p, call = ev.profile, ev.compiled_s or 0.0
    assert p is not None
    eager = f"; eager {fmt_seconds(ev.eager_s)}" if ev.eager_s else ""
    guard = (
        f"; the guard check (TorchDynamo Cache Lookup) took {fmt_seconds(p.guard_s)} of a "
        "profiled call"
        if p.guard_s
        else ""
    )
    if p.cuda and p.gpu_busy_s is not None:
        kernels = p.kernels or 0.0
        text = (
            f"The GPU was busy {fmt_seconds(p.gpu_busy_s)} of the {fmt_seconds(call)} a "
            f"compiled call takes ({kernels:.0f} kernel(s) a call{eager}): the rest is the CPU "
            f"preparing and launching them{guard}."
        )
        if ev.mode in ("reduce-overhead", "max-autotune"):
            return text + (
                " CUDA graphs are on in this mode, so what remains is Python and the guards "
                "around the graph: a larger batch per call amortises it."
            )
        if kernels >= 2:
            return text + (
                " --mode reduce-overhead replays the kernels as one CUDA graph: it could come "
                f"near {fmt_seconds(p.gpu_busy_s)} a call; a larger batch per call helps too."
            )
        return text + " A larger batch per call amortises it."
    graph = p.graph_s if p.graph_s is not None else p.work_s
    whole = (p.guard_s or 0.0) + (p.region_s or 0.0)
    return (
        f"Compiled {fmt_seconds(call)} a call{eager}. In a profile of {p.calls} calls, the "
        f"compiled graph's own work took {fmt_pct(graph / whole if whole else None)} of each "
        f"call and torch.compile's steps around it the rest{guard}: at this size the compiled "
        "call's fixed cost is larger than its work. A larger batch per call amortises it."
    )


def _tf32(ev: Evidence) -> bool:
    p, prec = ev.profile, ev.precision
    if p is None or prec is None or not p.cuda or not prec.tf32_hardware or p.busy_s <= 0:
        return False
    matmul = 0.0 if prec.tf32_matmul else p.matmul_s(dtype="float32", conv=False)
    conv = 0.0 if prec.tf32_conv else p.matmul_s(dtype="float32", conv=True)
    return (matmul + conv) >= TF32_SHARE * p.busy_s


def _tf32_text(ev: Evidence) -> str:
    p, prec = ev.profile, ev.precision
    assert p is not None
    assert prec is not None
    parts = []
    if not prec.tf32_matmul and p.matmul_s(dtype="float32", conv=False):
        parts.append(f"float32 matmuls ({p.matmul_names(dtype='float32', conv=False)})")
    if not prec.tf32_conv and p.matmul_s(dtype="float32", conv=True):
        parts.append(f"float32 convolutions ({p.matmul_names(dtype='float32', conv=True)})")
    share = (
        (0.0 if prec.tf32_matmul else p.matmul_s(dtype="float32", conv=False))
        + (0.0 if prec.tf32_conv else p.matmul_s(dtype="float32", conv=True))
    ) / p.busy_s
    return (
        f"TF32 is off, and {' and '.join(parts)} took {fmt_pct(share)} of the GPU's busy time "
        "in a profiled call: they run in full precision, compiled or not, so compiling cannot "
        "speed them up. %amp tf32 on (torch.set_float32_matmul_precision('high')) runs them on "
        "tensor cores; %amp compare measures it."
    )


def _matmul_bound(ev: Evidence) -> bool:
    p = ev.profile
    if p is None or p.busy_s <= 0 or _tf32(ev):
        return False
    return p.matmul_s() >= MATMUL_SHARE * p.busy_s


def _matmul_text(ev: Evidence) -> str:
    p = ev.profile
    assert p is not None
    busy = "the GPU's busy time" if p.cuda else "the time in ops"
    library = "cuBLAS/cuDNN" if p.cuda else "the CPU's BLAS/oneDNN"
    return (
        f"Matmuls and convolutions took {fmt_pct(p.matmul_s() / p.busy_s)} of {busy} in a "
        f"profiled compiled call ({p.matmul_names()}): the compiled code calls them from "
        f"{library} as eager code does, so compiling speeds up only the rest "
        f"({fmt_seconds(max(0.0, p.busy_s - p.matmul_s()))} a call)."
    )


def _bench_none(ev: Evidence) -> str:
    figures = f"eager {fmt_seconds(ev.eager_s)}, compiled {fmt_seconds(ev.compiled_s)} a call"
    p = ev.profile
    if p is not None and p.cuda and p.gpu_busy_s is not None:
        figures = (
            f"the GPU was busy {fmt_seconds(p.gpu_busy_s)} of the {fmt_seconds(ev.compiled_s)} "
            f"a compiled call takes (eager {fmt_seconds(ev.eager_s)})"
        )
    elif p is not None:
        figures += f"; ops and graphs {fmt_seconds(p.work_s)} of a profiled call"
    else:
        figures += "; no profile could be taken"
    return (
        f"no cause found: {figures}; no graph break, recompile or skipped CUDA graph, and no "
        "measured share above the thresholds (docs/magics.md lists them)."
    )


# ---------------------------------------------------------------------- amp


def _amp_pair(ev: Evidence) -> tuple[str, str] | None:
    """(reduced mode, reference mode): the faster of bf16/fp16 and of fp32/tf32."""
    timed = {m: f.time_s for m, f in ev.modes.items() if f.time_s}
    ref = min((m for m in ("fp32", "tf32") if m in timed), key=timed.__getitem__, default=None)
    red = min((m for m in ("bf16", "fp16") if m in timed), key=timed.__getitem__, default=None)
    return None if ref is None or red is None else (red, ref)


def _amp_profiles(ev: Evidence) -> tuple[str, str, CallProfile, CallProfile] | None:
    pair = _amp_pair(ev)
    if pair is None:
        return None
    red, ref = pair
    p_red, p_ref = ev.modes[red].profile, ev.modes[ref].profile
    if p_red is None or p_ref is None:
        return None
    return red, ref, p_red, p_ref


def _amp_overhead(ev: Evidence) -> bool:
    found = _amp_profiles(ev)
    if found is None:
        return False
    red, _, p, _ = found
    return bool(p.cuda and p.gpu_busy_s is not None) and (
        (p.gpu_busy_s or 0.0) < OVERHEAD_SHARE * ev.modes[red].time_s
    )


def _amp_overhead_text(ev: Evidence) -> str:
    found = _amp_profiles(ev)
    assert found is not None
    red, _, p, _ = found
    return (
        f"In {red} the GPU was busy {fmt_seconds(p.gpu_busy_s)} of the "
        f"{fmt_seconds(ev.modes[red].time_s)} a step takes ({p.kernels or 0:.0f} kernels a "
        "step): the rest is the CPU preparing and launching work, which precision does not "
        "shorten. Larger batches or layers put more of the step on the GPU."
    )


def _few_matmuls(ev: Evidence) -> bool:
    found = _amp_profiles(ev)
    if found is None:
        return False
    _, _, _, p = found
    return p.busy_s > 0 and p.matmul_s() < FEW_MATMULS_SHARE * p.busy_s


def _few_matmuls_text(ev: Evidence) -> str:
    found = _amp_profiles(ev)
    assert found is not None
    _, ref, _, p = found
    busy = "the GPU's busy time" if p.cuda else "the time in ops"
    return (
        f"Matmuls and convolutions took {fmt_pct(p.matmul_s() / p.busy_s)} of {busy} in "
        f"{ref} ({fmt_seconds(p.matmul_s())} of {fmt_seconds(p.busy_s)} a step): reduced "
        "precision speeds those up, not the rest of the step (elementwise ops, reductions)."
    )


def _slow_matmuls(ev: Evidence) -> bool:
    found = _amp_profiles(ev)
    if found is None:
        return False
    _, _, p_red, p_ref = found
    return p_red.matmul_s() > 0 and p_red.matmul_s() >= p_ref.matmul_s() > 0


def _slow_matmuls_text(ev: Evidence) -> str:
    found = _amp_profiles(ev)
    assert found is not None
    red, ref, p_red, p_ref = found
    where = "this GPU" if p_red.cuda else "this CPU"
    return (
        f"The {red} matmuls and convolutions took {fmt_seconds(p_red.matmul_s())} a step "
        f"against {fmt_seconds(p_ref.matmul_s())} in {ref}: on {where} they ran no faster "
        f"({p_red.matmul_names()})."
    )


def _casts(ev: Evidence) -> bool:
    found = _amp_profiles(ev)
    if found is None:
        return False
    _, _, p, _ = found
    return p.busy_s > 0 and p.casts_s >= CASTS_SHARE * p.busy_s


def _casts_text(ev: Evidence) -> str:
    found = _amp_profiles(ev)
    assert found is not None
    red, _, p, _ = found
    return (
        f"Autocast's casts (aten::_to_copy) took {fmt_seconds(p.casts_s)} of the "
        f"{fmt_seconds(p.busy_s)} of work a step in {red} ({fmt_pct(p.casts_s / p.busy_s)}): "
        "each step casts the weights it uses, which costs most where the matmuls are small."
    )


def _amp_none(ev: Evidence) -> str:
    pair = _amp_pair(ev)
    if pair is None:
        return "no cause found: the modes to compare did not all run."
    red, ref = pair
    figures = (
        f"{red} {fmt_seconds(ev.modes[red].time_s)} against {ref} "
        f"{fmt_seconds(ev.modes[ref].time_s)} a step"
    )
    found = _amp_profiles(ev)
    if found is not None:
        _, _, p_red, p_ref = found
        figures += (
            f"; matmuls and convolutions {fmt_seconds(p_ref.matmul_s())} a step in {ref}, "
            f"{fmt_seconds(p_red.matmul_s())} in {red}"
        )
    return f"no cause found: {figures}."


# ---------------------------------------------------------------------- %%profile


def _idle_kind(ev: Evidence) -> str | None:
    c = ev.cell
    if c is None or not c.cuda or c.kernel_count == 0 or (c.gpu_idle_fraction or 0.0) < 0.3:
        return None
    total = sum(c.idle_s.values())
    if total <= 0:
        return None
    return max(("host", "kernels", "copies", "other"), key=lambda k: c.idle_s.get(k, 0.0))


def _idle_share(ev: Evidence, kind: str) -> str:
    c = ev.cell
    assert c is not None
    total = sum(c.idle_s.values())
    return (
        f"GPU idle {fmt_pct(c.gpu_idle_fraction)} of the time, "
        f"{fmt_pct(c.idle_s[kind] / total)} of it"
    )


def _mean_kernel(c: ProfileFacts) -> float:
    return c.gpu_busy_s / c.kernel_count if c.gpu_busy_s and c.kernel_count else 0.0


def _host_syncs(ev: Evidence) -> bool:
    return _idle_kind(ev) == "host" and ev.cell is not None and ev.cell.syncs >= 10


def _host_launch(ev: Evidence) -> bool:
    c = ev.cell
    return (
        _idle_kind(ev) == "host"
        and c is not None
        and c.syncs < 10
        and c.kernel_count >= 100
        and _mean_kernel(c) < 20e-6
    )


def _host_other(ev: Evidence) -> bool:
    return _idle_kind(ev) == "host" and not _host_syncs(ev) and not _host_launch(ev)


def _host_other_text(ev: Evidence) -> str:
    c = ev.cell
    assert c is not None
    item = ""
    if c.biggest_cpu_item is not None:
        name, seconds = c.biggest_cpu_item
        item = (
            f"; on the CPU the largest item was {name[:80]} ({fmt_seconds(seconds)} of the "
            f"{fmt_seconds(c.window_s)} profiled)"
        )
    return (
        f"{_idle_share(ev, 'host')} waiting on the host: the CPU queued work more slowly than "
        f"the GPU ran it{item}. The timeline shows what the CPU did in the gaps."
    )


def _no_kernel(ev: Evidence) -> bool:
    c = ev.cell
    return c is not None and c.cuda and c.kernel_count == 0 and c.window_s > 0


def _many_syncs(ev: Evidence) -> bool:
    c = ev.cell
    return c is not None and c.cuda and c.syncs >= 10 and not _host_syncs(ev)


def _matmul_share(ev: Evidence) -> bool:
    c = ev.cell
    return (
        c is not None
        and c.cuda
        and not c.autocast_on
        and c.gpu_total_s > 0
        and c.matmul_gpu_s > 0.4 * c.gpu_total_s
    )


def _matmul_share_text(c: ProfileFacts) -> str:
    return (
        f"Matmuls and convolutions took {fmt_pct(c.matmul_gpu_s / c.gpu_total_s)} of the GPU "
        f"time ({c.matmul_names}), with autocast off: their precision decides most of this "
        'cell\'s GPU time. %amp compare "step()" measures fp32, tf32, bf16 and fp16 on it.'
    )


def _top_cpu(ev: Evidence) -> bool:
    c = ev.cell
    return (
        c is not None
        and not c.cuda
        and c.top_cpu is not None
        and c.cpu_total_s > 0
        and c.top_cpu[1] >= 0.3 * c.cpu_total_s
    )


def _per_op(ev: Evidence) -> bool:
    c = ev.cell
    return (
        c is not None and not c.cuda and c.op_calls >= 1000 and c.cpu_total_s / c.op_calls < 10e-6
    )


def _cell(ev: Evidence) -> ProfileFacts:
    assert ev.cell is not None
    return ev.cell


CAUSES: tuple[Cause, ...] = (
    # ---- what the compile recorded
    Cause(
        "cudagraphs",
        frozenset(("bench", "report")),
        lambda ev: bool(ev.compile and ev.compile.cudagraph_skips),
        _cudagraphs,
    ),
    Cause(
        "cudagraphs",
        frozenset(("bench",)),
        lambda ev: ev.pending_backward,
        lambda ev: PENDING_BACKWARD,
    ),
    Cause(
        "recompiles",
        frozenset(("bench", "report")),
        lambda ev: bool(ev.compile and ev.compile.recompiles),
        _recompiles,
    ),
    Cause(
        "graph_breaks",
        frozenset(("bench", "report")),
        lambda ev: bool(ev.compile and ev.compile.graph_break_count),
        _graph_breaks,
    ),
    # ---- what a profile of the compiled call measured
    Cause("tf32", frozenset(("bench",)), _tf32, _tf32_text),
    Cause("launch_bound", frozenset(("bench",)), _overhead, _overhead_text),
    Cause("matmuls", frozenset(("bench",)), _matmul_bound, _matmul_text),
    # ---- %amp compare: a profile of one step per mode
    Cause("launch_bound", frozenset(("amp",)), _amp_overhead, _amp_overhead_text),
    Cause("slow_matmuls", frozenset(("amp",)), _slow_matmuls, _slow_matmuls_text),
    Cause("few_matmuls", frozenset(("amp",)), _few_matmuls, _few_matmuls_text),
    Cause("casts", frozenset(("amp",)), _casts, _casts_text),
    # ---- %%profile: the cell's profile
    Cause(
        "no_kernel",
        frozenset(("profile",)),
        _no_kernel,
        lambda ev: (
            "No GPU kernel ran in this cell: the work stayed on the CPU (check that the model "
            "and the data are on 'cuda')."
        ),
    ),
    Cause(
        "host_syncs",
        frozenset(("profile",)),
        _host_syncs,
        lambda ev: (
            f"{_idle_share(ev, 'host')} waiting on the host, which stalls at "
            f"{_cell(ev).syncs_text}. Each sync empties the launch queue: read losses every N "
            "steps, not every step."
        ),
    ),
    Cause(
        "launch_bound",
        frozenset(("profile",)),
        _host_launch,
        lambda ev: (
            f"Launch-bound: {_idle_share(ev, 'host')} waiting on the host to launch "
            f"{_cell(ev).kernel_count:,} kernels of {fmt_seconds(_mean_kernel(_cell(ev)))} on "
            "average. Try %compile NAME --mode reduce-overhead (CUDA graphs: one launch per "
            "step), fuse work with torch.compile, or use a larger batch."
        ),
    ),
    Cause("host", frozenset(("profile",)), _host_other, _host_other_text),
    Cause(
        "between_kernels",
        frozenset(("profile",)),
        lambda ev: _idle_kind(ev) == "kernels",
        lambda ev: (
            f"{_idle_share(ev, 'kernels')} between kernels, queued back to back "
            f"({_cell(ev).kernel_count:,} kernels of {fmt_seconds(_mean_kernel(_cell(ev)))} on "
            "average): each launch costs a few µs of GPU time. Fewer, larger kernels help: "
            "torch.compile fuses them, --mode reduce-overhead replays them as a CUDA graph."
        ),
    ),
    Cause(
        "copies",
        frozenset(("profile",)),
        lambda ev: _idle_kind(ev) == "copies",
        lambda ev: (
            f"{_idle_share(ev, 'copies')} on copies: the GPU moved data instead of computing. "
            "Keep tensors on the GPU between steps, use pin_memory=True in the DataLoader and "
            ".to('cuda', non_blocking=True)."
        ),
    ),
    Cause(
        "other_wait",
        frozenset(("profile",)),
        lambda ev: _idle_kind(ev) == "other",
        lambda ev: (
            f"{_idle_share(ev, 'other')} with kernels queued but waiting on other work "
            "(events, other streams or copies on another stream): see the trace (--trace FILE) "
            "for what they waited on."
        ),
    ),
    Cause(
        "syncs",
        frozenset(("profile",)),
        _many_syncs,
        lambda ev: (
            f"{_cell(ev).syncs_text}: each one makes the CPU wait until the GPU has finished "
            "everything queued. Read losses every N steps (or accumulate them on the GPU) "
            "instead of calling .item()/.cpu()/print on CUDA tensors every step."
        ),
    ),
    Cause(
        "matmuls",
        frozenset(("profile",)),
        _matmul_share,
        lambda ev: _matmul_share_text(_cell(ev)),
    ),
    Cause(
        "top_op",
        frozenset(("profile",)),
        _top_cpu,
        lambda ev: (
            f"No GPU profiled: {(_cell(ev).top_cpu or ('', 0.0))[0]} takes "
            f"{fmt_pct((_cell(ev).top_cpu or ('', 0.0))[1] / _cell(ev).cpu_total_s)} of the CPU "
            "time in ops."
        ),
    ),
    Cause(
        "per_op",
        frozenset(("profile",)),
        _per_op,
        lambda ev: (
            f"{_cell(ev).op_calls:,} op calls of "
            f"{fmt_seconds(_cell(ev).cpu_total_s / _cell(ev).op_calls)} on average: per-op "
            "overhead dominates; larger tensors per call or torch.compile would help."
        ),
    ),
)

#: The line said when a question's causes all stay quiet (``None``: say nothing).
NONE_FOUND: dict[str, Callable[[Evidence], str] | None] = {
    "bench": _bench_none,
    "amp": _amp_none,
    "report": None,
    "profile": None,
}


def explain(ev: Evidence, *, limit: int | None = None) -> list[Explanation]:
    """The causes that fire for ``ev``, in the table's order; else the "no cause found" line."""
    out = [
        Explanation(cause.kind, cause.sentence(ev))
        for cause in CAUSES
        if ev.question in cause.questions and cause.trigger(ev)
    ]
    if limit is not None:
        out = out[:limit]
    none = NONE_FOUND.get(ev.question)
    if not out and none is not None:
        out.append(Explanation("none", none(ev)))
    return out
