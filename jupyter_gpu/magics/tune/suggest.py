"""Changes ``%tune`` suggests but does not apply: each needs the user's code changed.

Each comes with the measured share of the step it concerns and the line or op it is about:

- **hand-written attention** (a softmax between two batched matmuls, seen in the profiled
  steps' op order) -> ``torch.nn.functional.scaled_dot_product_attention``, which runs the same
  computation as one fused kernel (flash attention where it can). The share is the time in the
  batched matmuls and the softmax, forward and backward: what the fused kernel replaces, an
  upper bound on what it removes. The line is the user's module source that calls softmax.
- **host syncs** (CUDA): the time the host was blocked in them, and their lines (the sync pass).
- **memory headroom** (CUDA): the batch the free memory allows, from the first step's peak
  (the activations grow with the batch; the weights and optimizer state do not); with
  ``--batch NAME`` it is tried (``batch_size.py``) and the suggestion quotes what it measured,
  on a CPU too.
- **torch.compile's own findings** (graph breaks, recompiles): the causes table's advice
  (``causes``), quoting what the compile reported.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from jupyter_gpu.magics.compile.explain import from_report
from jupyter_gpu.magics.output.render import fmt_bytes, fmt_pct

from .batch_size import HEADROOM_USE, headroom_factor
from .results import FixResult, Suggestion
from .trial import memory_text

if TYPE_CHECKING:
    from jupyter_gpu.magics.compile.dynamo_watch import CompileReport

    from .evidence import Evidence

_ATTENTION_OPS = ("aten::bmm", "aten::_softmax", "aten::_softmax_backward_data")


def attention_patterns(prof: Any) -> int:
    """How many times a softmax ran between two batched matmuls, in the profiled ops' order."""
    if prof is None:
        return 0
    try:
        events = [
            e
            for e in prof.events()
            if e.name in ("aten::bmm", "aten::_softmax") and not _inside_fused_attention(e)
        ]
    except (RuntimeError, UnicodeDecodeError, AttributeError):
        return 0
    events.sort(key=lambda e: e.time_range.start)
    names = [e.name for e in events]
    return sum(
        1
        for i in range(1, len(names) - 1)
        if names[i] == "aten::_softmax" and names[i - 1] == names[i + 1] == "aten::bmm"
    )


def _inside_fused_attention(evt: Any) -> bool:
    """Run by ``scaled_dot_product_attention`` itself (its math kernel on a CPU: bmm, softmax)."""
    parent = evt.cpu_parent
    while parent is not None:
        if "scaled_dot_product" in parent.name:
            return True
        parent = parent.cpu_parent
    return False


def softmax_lines(model: Any) -> list[str]:
    """``Attention.forward line 74: y = torch.softmax(scores, dim=-1) @ v`` in the user's code."""
    found: list[str] = []
    seen: set[type] = set()
    for module in model.modules():
        cls = type(module)
        if cls in seen:
            continue
        seen.add(cls)
        forward = cls.__dict__.get("forward")
        if not inspect.isfunction(forward) or cls.__module__.startswith("torch."):
            continue  # torch's own modules call the fused kernels already
        try:
            lines, start = inspect.getsourcelines(forward)
        except (OSError, TypeError):
            continue
        for offset, line in enumerate(lines):
            if "softmax(" in line and "scaled_dot_product" not in line:
                found.append(f"{cls.__name__}.forward line {start + offset}: {line.strip()}")
    return found


def _attention(ev: Evidence, model: Any) -> Suggestion | None:
    a = ev.analysis
    count = attention_patterns(ev.profiler)
    if a is None or count == 0 or ev.window_s <= 0:
        return None
    rows = [r for r in a.rows if not r.on_gpu and r.name in _ATTENTION_OPS]
    seconds = sum(r.self_gpu_s if ev.cuda else r.self_cpu_s for r in rows)
    share = ev.share(seconds)
    where = "; ".join(softmax_lines(model)[:2]) or "a softmax between two batched matmuls"
    return Suggestion(
        "scaled_dot_product_attention",
        f"hand-written attention: {count // max(1, a.steps)} softmax(es) between two batched "
        f"matmuls a step; those matmuls and softmaxes (forward and backward) took "
        f"{fmt_pct(share)} of the profiled steps' time, which "
        "torch.nn.functional.scaled_dot_product_attention(q, k, v) runs as one fused kernel "
        "(is_causal=True for a causal mask), keeping no T x T scores for the backward pass",
        share,
        where,
    )


def _syncs(ev: Evidence) -> Suggestion | None:
    a = ev.analysis
    if not ev.cuda or a is None or not ev.sync_count:
        return None
    places = ev.sync_places or dict(a.syncs.places)
    where = "; ".join(f"{p} (x{n})" for p, n in sorted(places.items(), key=lambda kv: -kv[1])[:3])
    idle = ev.gpu_idle
    return Suggestion(
        "no host syncs",
        f"{a.syncs.describe()}; the host was blocked in them {fmt_pct(ev.sync_share)} of the "
        "profiled steps. Read values (loss.item(), printing a CUDA tensor) every N steps or "
        "keep them on the GPU, so the CPU queues the next step while the GPU works"
        + (f" (the GPU idled {fmt_pct(idle)} of the steps)" if idle is not None else ""),
        ev.sync_share,
        where or "not traced to a line",
    )


def _larger_batch(
    ev: Evidence, batch_name: str | None, tried: FixResult | None
) -> Suggestion | None:
    """The batch the free memory allows (CUDA), with its measured figure where it was tried."""
    if tried is not None and tried.ratio is not None:
        if not tried.ratio.faster:
            return None
        return Suggestion(
            "a larger batch",
            f"tried ({tried.name}): {tried.ratio.describe()} in samples a second"
            + (f", on top of {tried.baseline()}" if tried.on_top_of else "")
            + (
                f", its first step's peak {memory_text(tried.memory_delta_bytes)}"
                if tried.memory_delta_bytes is not None
                else ""
            )
            + f". Raise {batch_name} (and scale the learning rate with it): more work per step "
            "for the same fixed costs",
            None,
            batch_name or "",
        )
    peak, free = ev.first.peak_bytes, ev.free_bytes
    factor = headroom_factor(ev)
    if factor is None or factor < 1.5 or not peak or free is None:
        return None
    name = batch_name or "the batch size"
    how = "" if batch_name else "; pass --batch NAME (the variable with it) and %tune tries it"
    return Suggestion(
        "a larger batch",
        f"the first step's peak rose {fmt_bytes(peak)} above the memory in use before it, with "
        f"{fmt_bytes(free)} free (the device's free memory and torch's unused cache): a batch "
        f"about {factor:.1f}x as large would fit, if the activations grow with the batch "
        f"({HEADROOM_USE:.0%} of the free memory used). Raise {name} (and scale the learning "
        f"rate with it): more work per step for the same fixed costs{how}",
        None,
        name,
    )


def _compile_causes(report: CompileReport | None, mode: str) -> list[Suggestion]:
    if report is None:
        return []
    return [
        Suggestion(f"torch.compile ({mode}): {e.kind}", e.text, None, "the compile report")
        for e in from_report(report)
    ]


def suggestions(
    ev: Evidence,
    model: Any,
    batch_name: str | None,
    reports: dict[str, CompileReport | None],
    tried_batch: FixResult | None = None,
) -> list[Suggestion]:
    """Every suggestion the measurements support, the largest measured share first.

    ``tried_batch``: the larger batch as measured (``--batch NAME``), quoted by its suggestion.
    """
    found = [s for s in (_attention(ev, model), _syncs(ev)) if s is not None]
    found.sort(key=lambda s: -(s.share or 0.0))
    larger = _larger_batch(ev, batch_name, tried_batch)
    if larger is not None:
        found.append(larger)
    for mode, report in reports.items():
        found += _compile_causes(report, mode)
    return found
