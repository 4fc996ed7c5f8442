"""``%compile``'s measurements, put in the shape the table of causes reads (``causes/``).

A compile report becomes :class:`~jupyter_gpu.magics.causes.CompileFacts`; a bench adds
its medians, a profile of the compiled call, CUDA graphs' slow-path warning and the TF32
settings it ran under. The causes and their sentences live in the one table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jupyter_gpu.magics.causes import (
    CompileFacts,
    Evidence,
    Explanation,
    GraphBreakFact,
    Precision,
    explain,
)
from jupyter_gpu.magics.probes.evidence import CallProfile

if TYPE_CHECKING:
    from .dynamo_watch import CompileReport

__all__ = ["Explanation", "bench_explanations", "from_report", "precision_now"]


def facts(report: CompileReport | None) -> CompileFacts | None:
    """The figures of a compile report that causes read."""
    if report is None:
        return None
    return CompileFacts(
        graphs=report.graphs,
        graph_break_count=report.graph_break_count,
        graph_breaks=tuple(
            GraphBreakFact(gb.where, gb.source, gb.reason) for gb in report.graph_breaks
        ),
        recompiles=tuple((rc.function, rc.reason) for rc in report.recompiles),
        cudagraph_skips=tuple(report.cudagraph_skips),
    )


def from_report(report: CompileReport) -> list[Explanation]:
    """What a compile report shows in the way (CUDA graphs skipped, recompiles, breaks)."""
    return explain(Evidence("report", compile=facts(report)))


def precision_now() -> Precision | None:
    """TF32 as set now, and whether this GPU has it (``None`` without CUDA)."""
    from jupyter_gpu.magics.shell.lazy_torch import cuda_in_use

    if not cuda_in_use():
        return None
    from jupyter_gpu.magics.probes.precision import tf32_enabled, tf32_supported

    matmul, conv = tf32_enabled()
    return Precision(matmul, conv, tf32_supported())


def bench_explanations(
    *,
    eager_s: float,
    compiled_s: float,
    cuda: bool,
    options: dict[str, Any],
    report: CompileReport | None,
    profile: CallProfile | None,
    pending_backward: bool,
    precision: Precision | None,
) -> list[Explanation]:
    """Why the compiled code was slower or no faster, from what this bench measured."""
    return explain(
        Evidence(
            "bench",
            cuda=cuda,
            eager_s=eager_s,
            compiled_s=compiled_s,
            mode=options.get("mode"),
            backend=backend if isinstance(backend := options.get("backend"), str) else None,
            compile=facts(report),
            pending_backward=pending_backward,
            profile=profile,
            precision=precision,
        )
    )
