"""The causes of ``%compile``: what stands in a compile's way, and why it was no faster.

``report``: what a compile report recorded; ``bench``: what ``--bench`` measured and a profile
of the compiled call.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from jupyter_gpu.magics.output.render import fmt_pct
from jupyter_gpu.magics.shell.quiet import PENDING_BACKWARD
from jupyter_gpu.measure import fmt_seconds

from .facts import MATMUL_SHARE, OVERHEAD_SHARE, TF32_SHARE, Cause, Evidence

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


#: A fix: a sentence, or one made from torch's reason (to quote what it names).
Fix = str | Callable[[str], str]


def _fix_for(reason: str, fixes: tuple[tuple[str, Fix], ...], otherwise: str) -> str:
    """The fix of the first phrase of ``fixes`` found in torch's ``reason``, else ``otherwise``."""
    lowered = reason.lower()
    fix = next((fix for phrase, fix in fixes if phrase in lowered), otherwise)
    return fix(reason) if callable(fix) else fix


def _skip_fix(reason: str) -> str:
    return _fix_for(
        reason, _SKIP_FIXES, "see torch's reason; TORCH_LOGS=cudagraphs prints where it was found"
    )


def _cudagraphs(ev: Evidence) -> str:
    c = ev.compile
    assert c is not None
    reasons = "; ".join(c.cudagraph_skips)
    return (
        f"CUDA graphs skipped: {reasons} (torch's reason). Without them reduce-overhead "
        f"launches every kernel as eager code does. Fix: {_skip_fix(c.cudagraph_skips[0])}."
    )


# What to do about a recompile follows the kind of guard that failed. The phrases are those of
# torch 2.13's reasons (torch/_dynamo/guards.py: "BACKEND_MATCH failure: ...", the guard code of
# ID_MATCH "___check_obj_id(...)" and TYPE_MATCH "___check_type_id(...)", an EQUALS_MATCH's
# "n == 2"; the C++ checks: "GLOBAL_STATE changed: grad_mode", "tensor 'x' size mismatch at
# index 0. expected 4, actual 5", "... stride mismatch ...", "... dtype mismatch ...").
# tests/unit/magics/test_recompile_advice.py gets each of them from a real recompile.

#: What each process-wide setting in a ``GLOBAL_STATE changed: <names>`` reason is.
_GLOBAL_STATE = {
    "grad_mode": "autograd on or off (torch.no_grad(), torch.inference_mode())",
    "autocast": "autocast (%amp on, torch.autocast)",
    "default_dtype": "torch.set_default_dtype",
    "deterministic_algorithms": "torch.use_deterministic_algorithms",
    "torch_function": "a torch function mode or torch.overrides handler",
}


def _guard_code(reason: str) -> str:
    """The guard's code from a reason's first line: ``n == 2`` (no compile id, no comment)."""
    first = reason.splitlines()[0] if reason else ""
    first = re.sub(r"^\s*\d+/\d+:\s*", "", first)  # "7/0: " (frame / compile id)
    return first.split("  #")[0].strip()


def _global_state_fix(reason: str) -> str:
    names = reason.split("changed:", 1)[-1].split()
    described = [
        f"{name} ({next((v for k, v in _GLOBAL_STATE.items() if name.startswith(k)), name)})"
        for name in names
    ] or ["a process-wide setting"]
    return (
        f"The compiled code ran with {', '.join(described)} not as it was compiled: torch "
        "compiles once for each state it meets (training under grad and evaluation under "
        "torch.no_grad() are two compiles, each once). Keep the setting the same around the "
        "compiled calls to compile once; shapes have nothing to do with it"
    )


def _equals_fix(reason: str) -> str:
    guard = _guard_code(reason)
    return (
        f"The compiled code was specialised on a Python value ({guard}) and this call passed "
        "another: each new value compiles again. A value with a few settings costs one compile "
        "each; one that changes every call (a step counter, a Python float) is better passed "
        "as a tensor, which is an input rather than a constant"
    )


_SHAPES_FIX = (
    "A tensor's shape differed from the compile's: torch compiles again, and after such a "
    "change compiles the sizes that changed as dynamic (automatic dynamic shapes, on by "
    "default). Keep shapes fixed (drop or pad the last short batch), or pass --dynamic to "
    "compile for changing shapes from the start"
)

_RECOMPILE_FIXES: tuple[tuple[str, Fix], ...] = (
    (
        "backend_match failure",
        "The same code was compiled with another backend or other options (mode, dynamic): "
        "dynamo keeps compiled code per code object, which two instances of one model class, "
        "or a function compiled twice, share, so the second compile's calls recompile it for "
        "their backend (once each). Compile once and reuse the result, or torch._dynamo.reset() "
        "before compiling with other options; shapes have nothing to do with it",
    ),
    (
        "global_state changed: num_threads",
        "This guard compares torch.get_num_threads() in the thread that calls the compiled code, "
        "and it differed there. One way that happens: activation checkpointing re-runs a "
        "block's forward in autograd's backward thread, which takes the count torch keeps for "
        "new threads, and a pinned DataLoader's thread sets that to 1 (pytorch/pytorch#60469). "
        "It costs one compile, once; to avoid it, call "
        "torch.set_num_threads(torch.get_num_threads()) after the loader's iterator starts",
    ),
    ("global_state changed", _global_state_fix),
    ("size mismatch", _SHAPES_FIX),
    (".size()[", _SHAPES_FIX),  # a guard on a dynamic size, after automatic dynamic shapes
    (
        "stride mismatch",
        "A tensor's memory layout (its strides) differed from the compile's: a transposed, "
        "sliced or channels_last tensor where the compile saw another layout. Pass inputs in "
        "one layout (.contiguous(), or channels_last every time)",
    ),
    (
        "dtype mismatch",
        "A tensor's dtype differed from the compile's (float32 one call, float64 or bfloat16 "
        "another): cast inputs to one dtype before the call",
    ),
    (
        "requires_grad mismatch",
        "A tensor needed gradients in one call and not in another (requires_grad): keep it the "
        "same, or compile the training and the evaluation call apart",
    ),
    (
        "device mismatch",
        "A tensor was on another device than at the compile: move inputs to one device first",
    ),
    (
        "___check_obj_id",
        "The compiled code holds an object by its identity (the guard compares id(): a "
        "function, a module, a global) and this call met another object, as when the cell "
        "that defines a function or builds a model runs again. Each new object costs a "
        "compile: keep the object (change its contents, not the name's binding), or compile "
        "after defining it",
    ),
    (
        "___check_type_id",
        "An argument's or a global's type differed from the compile's (the guard compares "
        "type(), e.g. a list one call and a tuple the next): pass the same type every call",
    ),
    (
        ".training ==",
        "A module's training flag differed from the compile's (model.train() / model.eval()): "
        "torch compiles once for each, which is expected and costs nothing afterwards",
    ),
    (" == ", _equals_fix),
)


def _recompiles(ev: Evidence) -> str:
    c = ev.compile
    assert c is not None
    function, reason = c.recompiles[0]
    fix = _fix_for(
        reason,
        _RECOMPILE_FIXES,
        "Keep what that guard checks the same from call to call (TORCH_LOGS=recompiles prints "
        "every recompile with its guard and line)",
    )
    return (
        f"{len(c.recompiles)} recompile(s); the first guard that failed: {function}: "
        f"{reason.splitlines()[0][:160]}. Each recompile costs a compile and adds guards to "
        f"check. {fix}."
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


#: What torch.compile's CUDA graphs cover (reduce-overhead, max-autotune). One per graph that
#: Inductor compiled: AOTAutograd's forward and backward are separate captures ("The forward and
#: backward are separate graph captures", PyTorch's CUDAGraph Trees notes,
#: torch.compiler_cudagraph_trees), and each graph break starts another (its GRAPH 1-4
#: example). What the expression runs outside the compiled function is not captured at all.
_CUDA_GRAPHS_COVER = (
    "one graph per compiled graph (the forward and, in training, the backward are separate "
    "graphs, and each graph break adds more), while what runs outside the compiled code (a "
    "loss computed after it, optimizer.step() unless compiled too) still launches its kernels "
    "one by one."
)


#: Backends that generate no code (torch/_dynamo/backends/debugging.py): ``eager`` and its
#: variants return the FX graph Dynamo captured, run op by op as eager code runs (``eager``
#: returns ``gm.forward``); ``aot_eager`` and its variants trace the forward and backward with
#: AOTAutograd and "compile" them with ``boxed_nop``, which returns them unchanged.
_EAGER_BACKENDS = frozenset(("eager", "eager_noexcept", "eager_debug", "pre_dispatch_eager"))


def _compiles_nothing(ev: Evidence) -> bool:
    backend = ev.backend or ""
    return backend in _EAGER_BACKENDS or backend.startswith("aot_eager")


def _compiles_nothing_text(ev: Evidence) -> str:
    p = ev.profile
    backend = ev.backend or ""
    guard = (
        f"; the guard check (TorchDynamo Cache Lookup) took {fmt_seconds(p.guard_s)} of a "
        "profiled call"
        if p is not None and p.guard_s
        else ""
    )
    what = (
        "it traces the forward and backward graphs with AOTAutograd and runs them through a "
        "compiler that returns them unchanged"
        if backend.startswith("aot_eager")
        else "it runs the graph Dynamo captured op by op, as eager code runs it"
    )
    return (
        f"The {backend} backend compiles nothing: {what} (torch/_dynamo/backends/"
        "debugging.py), so no kernel is generated or fused: against eager code it changes only "
        "the Python around the same ops (Dynamo's guard check in, the module calls it traced "
        f"away out; eager {fmt_seconds(ev.eager_s)}, compiled with {backend} "
        f"{fmt_seconds(ev.compiled_s)} a call{guard}). It is for finding graph breaks and "
        "recompiles; --backend inductor (the default) compiles."
    )


def _overhead(ev: Evidence) -> bool:
    p, call = ev.profile, ev.compiled_s
    if p is None or not call or _compiles_nothing(ev):
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
                f" CUDA graphs are on in this mode: {_CUDA_GRAPHS_COVER} So what remains is "
                "Python and the guards around the graphs, and any kernels launched outside "
                "them: compile the loss and the optimizer step too, or a larger batch per call "
                "amortises it."
            )
        if kernels >= 2:
            return text + (
                " --mode reduce-overhead records the compiled code's kernels as CUDA graphs and "
                f"replays them: {_CUDA_GRAPHS_COVER} A call comes near "
                f"{fmt_seconds(p.gpu_busy_s)} only as far as those graphs cover its "
                f"{kernels:.0f} kernels; a larger batch per call helps too."
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
    if _compiles_nothing(ev):
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
    if p is None or p.busy_s <= 0 or _tf32(ev) or _compiles_nothing(ev):
        return False
    return p.matmul_s() >= MATMUL_SHARE * p.busy_s


def _matmul_text(ev: Evidence) -> str:
    p = ev.profile
    assert p is not None
    share = p.matmul_s() / p.busy_s
    if p.cuda:
        # Kernel times, which the profiler does not stretch: per call as profiled.
        rest = f"the other {fmt_seconds(max(0.0, p.busy_s - p.matmul_s()))} of GPU time a call"
    else:
        # The few profiled calls are not the timed median: on a CPU their op times include the
        # profiler's own cost per op and whatever else the cores did during those calls (a
        # compiled CPU training step timed at 0.8-18 ms a call profiled at 6-98 ms on a busy
        # 2-core VM). The share is what the profile measured; the seconds are that share of
        # the timed call, the figure printed beside it.
        call = ev.compiled_s if ev.compiled_s else p.wall_s
        rest = (
            f"{fmt_pct(1.0 - share)} of the time in ops, about "
            f"{fmt_seconds(max(0.0, 1.0 - share) * call)} of the {fmt_seconds(call)} a compiled "
            "call takes"
        )
    busy = "the GPU's busy time" if p.cuda else "the time in ops"
    library = "cuBLAS/cuDNN" if p.cuda else "the CPU's BLAS/oneDNN"
    return (
        f"Matmuls and convolutions took {fmt_pct(share)} of {busy} in a profiled compiled call "
        f"({p.matmul_names()}): the compiled code calls them from {library} as eager code does, "
        f"so compiling speeds up only the rest ({rest})."
    )


def no_cause_bench(ev: Evidence) -> str:
    """The "no cause found" line of ``%compile --bench``, with its figures."""
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


BENCH = frozenset(("bench",))
#: The causes a compile report shows by itself as well as beside a benchmark.
BENCH_AND_REPORT = frozenset(("bench", "report"))

COMPILE_CAUSES: tuple[Cause, ...] = (
    # ---- what the compile recorded
    Cause(
        "cudagraphs",
        BENCH_AND_REPORT,
        lambda ev: bool(ev.compile and ev.compile.cudagraph_skips),
        _cudagraphs,
    ),
    Cause(
        "cudagraphs",
        BENCH,
        lambda ev: ev.pending_backward,
        lambda ev: PENDING_BACKWARD,
    ),
    Cause(
        "recompiles",
        BENCH_AND_REPORT,
        lambda ev: bool(ev.compile and ev.compile.recompiles),
        _recompiles,
    ),
    Cause(
        "graph_breaks",
        BENCH_AND_REPORT,
        lambda ev: bool(ev.compile and ev.compile.graph_break_count),
        _graph_breaks,
    ),
    # ---- what was compiled, and what a profile of the compiled call measured
    Cause("no_compiler", BENCH, _compiles_nothing, _compiles_nothing_text),
    Cause("tf32", BENCH, _tf32, _tf32_text),
    Cause("launch_bound", BENCH, _overhead, _overhead_text),
    Cause("matmuls", BENCH, _matmul_bound, _matmul_text),
)
