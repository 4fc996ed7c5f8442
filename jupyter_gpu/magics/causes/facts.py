"""What a cause reads: the records of one run's measurements, and the shares they are held to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from jupyter_gpu.magics.probes.evidence import CallProfile

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
    #: Measured steps the window holds (``window_s`` is their whole periods).
    steps: int = 1
    #: Seconds the host was blocked in the syncs, over the window.
    sync_blocked_s: float = 0.0
    #: Seconds inside the DataLoader's ``__next__`` over the window, and torch's range name.
    loader_s: float = 0.0
    loader_range: str = ""
    #: The notebook's DataLoaders as read after the run ("loader (num_workers=0, ...)"), and
    #: the settings that would change, with the worker count from the CPU quota.
    loader_seen: str = ""
    loader_fix: str = ""


@dataclass(frozen=True)
class Evidence:
    """What one run of a magic measured; each cause reads the fields it needs."""

    question: str
    cuda: bool = False
    # bench: per-call medians, the compile, a profile of the compiled call
    eager_s: float | None = None
    compiled_s: float | None = None
    mode: str | None = None
    #: The backend's name (``inductor``, ``eager``, ...); ``None`` for a backend function.
    backend: str | None = None
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
