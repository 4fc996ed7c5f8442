"""Measurements a "Why" line can stand on: a profile of a few calls, read into plain figures.

``%compile --bench`` profiles the compiled call, and ``%amp compare`` and ``%tune`` one step,
each the least disturbed of a few calls (:func:`profile_one_call`), after their timing runs
(inside their repeated runs, so the profiled calls are put back too). One
:class:`CallProfile` holds, per call: the GPU's busy time (the union of its kernels) and the
kernel count; torch.compile's own steps as the profiler names them (``TorchDynamo Cache
Lookup``: the guard check; ``Torch-Compiled Region``; ``## Call CompiledFxGraph ##``: the
compiled graph itself); the time in ops; and the matmuls and convolutions that ran, by the
dtype of their inputs (``record_shapes=True`` makes the profiler keep the dtypes), with their
time (GPU time on CUDA, CPU time otherwise). Only the innermost matmul of a nest counts
(``aten::linear`` holds ``aten::addmm``; under autocast the outer one still sees float32).

The profiler is created with ``acc_events=True`` (torch 2.10 and 2.11 otherwise warn "Profiler
clears events at the end of each cycle" about a cycle nobody ran), its warnings are the magic's
own and dropped, and kineto's ``USDT ... profiler_start/stop`` lines, written straight to the
process's stderr at start and stop, are kept out of the notebook (stderr is pointed at
``/dev/null`` while the profiler starts and stops, never while the user's code runs).
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jupyter_gpu.magics.shell.kineto import kineto_quiet as _stderr_silenced
from jupyter_gpu.magics.shell.lazy_torch import cuda_in_use, torch_if_imported
from jupyter_gpu.measure.quiet import timing_in_progress
from jupyter_gpu.measure.timing import union_length

if TYPE_CHECKING:
    from torch.autograd.profiler_util import FunctionEvent
    from torch.profiler import profile

_US = 1e-6
#: Ops that are a matmul or a convolution (the innermost of a nest is counted).
MATMUL_OPS = frozenset(
    (
        "aten::linear",
        "aten::matmul",
        "aten::mm",
        "aten::addmm",
        "aten::bmm",
        "aten::baddbmm",
        "aten::addbmm",
        "aten::_addmm_activation",
        "aten::mv",
        "aten::addmv",
        "aten::_scaled_mm",
        "aten::_int_mm",
        "mkldnn::_linear_pointwise",
    )
)
CONV_OPS = frozenset(
    (
        "aten::conv1d",
        "aten::conv2d",
        "aten::conv3d",
        "aten::convolution",
        "aten::_convolution",
        "aten::cudnn_convolution",
        "aten::cudnn_convolution_transpose",
        "aten::mkldnn_convolution",
        "aten::thnn_conv2d",
        "aten::_slow_conv2d_forward",
        "aten::slow_conv3d_forward",
        "aten::_nnpack_spatial_convolution",
        "aten::convolution_backward",
        "mkldnn::_convolution_pointwise",
    )
)
_DTYPES = {
    "float": "float32",
    "double": "float64",
    "c10::Half": "float16",
    "c10::BFloat16": "bfloat16",
    "c10::Float8_e4m3fn": "float8",
    "c10::Float8_e5m2": "float8",
}
_GUARD = "TorchDynamo Cache Lookup"
_REGION = "Torch-Compiled Region"
_GRAPH = "## Call CompiledFxGraph"


@dataclass(frozen=True)
class MatmulOp:
    """Matmuls or convolutions of one kind and dtype: calls and time, per profiled call."""

    name: str
    dtype: str
    conv: bool
    calls: float
    time_s: float


@dataclass(frozen=True)
class CallProfile:
    """What a profile of ``calls`` calls of the same code showed, per call (seconds)."""

    calls: int
    #: Some of the work ran on a CUDA device (else the GPU figures are ``None``).
    cuda: bool
    #: Wall-clock time of one call, profiler on, the GPU's work included.
    wall_s: float
    #: Time in ops and compiled graphs on the CPU (outermost events only).
    work_s: float
    #: The union of the kernels' time spans: how long the GPU was busy.
    gpu_busy_s: float | None = None
    #: Kernels launched (copies and memsets not counted).
    kernels: float | None = None
    #: In Dynamo's guard checks; ``None`` where the profile has none (eager code), as below.
    guard_s: float | None = None
    #: In ``Torch-Compiled Region`` events: the compiled call as a whole.
    region_s: float | None = None
    #: In Inductor's compiled graphs (``## Call CompiledFxGraph``).
    graph_s: float | None = None
    #: In dtype casts (``aten::_to_copy``): device time on CUDA, else CPU time.
    casts_s: float = 0.0
    #: The matmuls and convolutions, by op and dtype, most time first.
    matmul: list[MatmulOp] = field(default_factory=list)

    def matmul_s(self, *, dtype: str | None = None, conv: bool | None = None) -> float:
        """Time in matmuls/convolutions per call (of ``dtype``, of convolutions or not)."""
        return sum(
            m.time_s
            for m in self.matmul
            if (dtype is None or m.dtype == dtype) and (conv is None or m.conv == conv)
        )

    def matmul_names(self, *, dtype: str | None = None, conv: bool | None = None) -> str:
        """``aten::addmm x3, aten::mm x2`` (calls per profiled call)."""
        counts: dict[str, float] = {}
        for m in self.matmul:
            if (dtype is None or m.dtype == dtype) and (conv is None or m.conv == conv):
                counts[m.name] = counts.get(m.name, 0.0) + m.calls
        ranked = sorted(counts.items(), key=lambda kv: -kv[1])[:3]
        return ", ".join(f"{name} x{n:g}" for name, n in ranked)

    @property
    def busy_s(self) -> float:
        """The work the measured figures compare with: GPU busy time on CUDA, else op time."""
        return self.gpu_busy_s if self.cuda and self.gpu_busy_s is not None else self.work_s


@timing_in_progress()  # our own background work waits meanwhile (measure/quiet.py)
def profile_calls(run: Callable[[], Any], *, calls: int = 3) -> CallProfile | None:
    """Profile ``calls`` calls of ``run`` (CPU ops, and CUDA kernels when CUDA is in use).

    ``None`` if a profiler is already running or cannot start here. Never raises for the
    profiler's sake; the user's code's own errors propagate.
    """
    if torch_if_imported() is None:
        return None
    import torch  # loaded already: never imported here

    # torch.autograd._profiler_enabled is this function, re-exported where mypy cannot see it
    if torch._C._autograd._profiler_enabled():
        return None
    cuda = cuda_in_use()
    activities = [torch.profiler.ProfilerActivity.CPU]
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the profiler's own; the user's were seen in timing
        prof = torch.profiler.profile(activities=activities, record_shapes=True, acc_events=True)
        try:
            with _stderr_silenced():
                prof.start()
        except RuntimeError:
            return None
        start = time.perf_counter()
        try:
            for _ in range(calls):
                run()
            if cuda:
                torch.cuda.synchronize()
        except BaseException:
            with _stderr_silenced(), contextlib.suppress(UnicodeDecodeError):
                prof.stop()  # a garbled trace must not replace the code's own error
            raise
        wall = (time.perf_counter() - start) / calls
        try:
            with _stderr_silenced():
                prof.stop()  # torch reads its trace back here, and now and then garbles it
            return read_profile(prof, calls=calls, cuda=cuda, wall_s=wall)
        except (RuntimeError, UnicodeDecodeError, AttributeError):
            return None  # a trace torch cannot parse (see %%profile): no evidence, no guess


def profile_one_call(
    run: Callable[[], Any], *, tries: int = 5, within_s: float = 0.5
) -> CallProfile | None:
    """The least disturbed of up to ``tries`` calls of ``run``, each profiled on its own.

    A call the machine interrupted (another process given the core: a scheduler slice is
    milliseconds, and on a busy machine tens of them) counts the wait in whichever op was
    running, and one such op can make a step of convolutions look like a step of anything
    else. An interruption only ever adds time, so of several calls the one with the least
    work (``busy_s``) is the nearest to what the step is made of. The first call always runs;
    more run while ``within_s`` has not passed since the first began, so a long step is
    profiled once. ``None`` where the profiler cannot run (see :func:`profile_calls`).
    """
    best: CallProfile | None = None
    start = time.perf_counter()
    for _ in range(max(1, tries)):
        call = profile_calls(run, calls=1)
        if call is None:
            break
        if best is None or call.busy_s < best.busy_s:
            best = call
        if time.perf_counter() - start >= within_s:
            break
    return best


def _dtype_of(dtypes: list[str]) -> str:
    tensors = [d for d in dtypes if d and d not in ("Scalar", "ScalarList", "TensorList")]
    if not tensors:
        return "unknown"
    name = Counter(tensors).most_common(1)[0][0]
    return _DTYPES.get(name, name)


def read_profile(prof: profile, *, calls: int, cuda: bool, wall_s: float) -> CallProfile:
    """The figures of a stopped ``torch.profiler.profile`` (see :class:`CallProfile`).

    ``cuda``: the profile asked for CUDA activity. The call counts as a GPU call only if some
    work ran on the device: a CPU function profiled in a process that has used CUDA before has
    no GPU time to speak of (its ops' CPU time is what it costs).
    """
    events = list(prof.events())  # type: ignore[no-untyped-call]  # torch leaves it unannotated
    cuda = cuda and any(_on_device(evt) for evt in events)
    dtypes = _kineto_dtypes(prof)
    kernels: list[tuple[float, float]] = []
    guard = region = graph = work = casts = 0.0
    seen = {"guard": False, "region": False, "graph": False}
    ops: dict[tuple[str, str], list[float]] = {}
    for evt in events:
        name = evt.name
        elapsed = evt.time_range.elapsed_us() * _US
        if _on_device(evt):
            lowered = name.lower()
            if not evt.is_user_annotation and "memcpy" not in lowered and "memset" not in lowered:
                kernels.append((evt.time_range.start * _US, evt.time_range.end * _US))
            continue
        if name.startswith(_GUARD):
            guard += elapsed
            seen["guard"] = True
        elif name.startswith(_REGION):
            region += elapsed
            seen["region"] = True
        elif name.startswith(_GRAPH):
            graph += elapsed
            seen["graph"] = True
            if not _inside_work(evt):
                work += elapsed
        elif "::" in name and not evt.is_user_annotation and not _inside_work(evt):
            work += elapsed
        if name == "aten::_to_copy" and not _inside(evt, "aten::_to_copy"):
            casts += _device_time(evt) if cuda else elapsed
        if (name in MATMUL_OPS or name in CONV_OPS) and not _has_matmul_below(evt):
            key = (name, _dtype_of(dtypes.get((name, evt.time_range.start), [])))
            acc = ops.setdefault(key, [0.0, 0.0])
            acc[0] += 1
            acc[1] += _device_time(evt) if cuda else elapsed
    per = 1.0 / calls
    return CallProfile(
        calls=calls,
        cuda=cuda,
        wall_s=wall_s,
        work_s=work * per,
        gpu_busy_s=union_length(kernels) * per if cuda else None,
        kernels=len(kernels) * per if cuda else None,
        guard_s=guard * per if seen["guard"] else None,
        region_s=region * per if seen["region"] else None,
        graph_s=graph * per if seen["graph"] else None,
        casts_s=casts * per,
        matmul=[
            MatmulOp(name, dtype, name in CONV_OPS, n * per, t * per)
            for (name, dtype), (n, t) in sorted(ops.items(), key=lambda kv: -kv[1][1])
        ],
    )


def _on_device(evt: FunctionEvent) -> bool:
    return str(evt.device_type).endswith(("CUDA", "PrivateUse1"))


def _kineto_dtypes(prof: profile) -> dict[tuple[str, float], list[str]]:
    """(op name, start µs as ``FunctionEvent`` has it) -> the dtypes of its inputs."""
    results = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    if results is None:
        return {}
    t0 = results.trace_start_ns()
    out: dict[tuple[str, float], list[str]] = {}
    for k in results.events():
        try:
            out[(k.name(), (k.start_ns() - t0) / 1000)] = list(k.dtypes())
        except (AttributeError, RuntimeError):
            return out
    return out


def _device_time(evt: FunctionEvent) -> float:
    value = getattr(evt, "device_time_total", None)
    if value is None:
        value = getattr(evt, "cuda_time_total", None)
    return float(value or 0.0) * _US


def _inside(evt: FunctionEvent, name: str) -> bool:
    parent = evt.cpu_parent
    while parent is not None:
        if parent.name == name:
            return True
        parent = parent.cpu_parent
    return False


def _inside_work(evt: FunctionEvent) -> bool:
    """Below an op or a compiled graph already counted as work."""
    parent = evt.cpu_parent
    while parent is not None:
        if "::" in parent.name or parent.name.startswith(_GRAPH):
            return True
        parent = parent.cpu_parent
    return False


def _has_matmul_below(evt: FunctionEvent) -> bool:
    for child in evt.cpu_children:
        if child.name in MATMUL_OPS or child.name in CONV_OPS or _has_matmul_below(child):
            return True
    return False
