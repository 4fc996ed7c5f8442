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

The records a cause reads are ``facts.py``; each magic's causes are ``compile.py``, ``amp.py``
and ``profile.py``; here they are one table, in that order.
"""

from __future__ import annotations

from collections.abc import Callable

from .amp import AMP_CAUSES, no_cause_amp
from .compile import COMPILE_CAUSES, no_cause_bench
from .facts import (
    CASTS_SHARE,
    FEW_MATMULS_SHARE,
    MATMUL_SHARE,
    OVERHEAD_SHARE,
    TF32_SHARE,
    Cause,
    CompileFacts,
    Evidence,
    Explanation,
    GraphBreakFact,
    ModeFacts,
    Precision,
    ProfileFacts,
)
from .profile import PROFILE_CAUSES

__all__ = [
    "CASTS_SHARE",
    "CAUSES",
    "FEW_MATMULS_SHARE",
    "MATMUL_SHARE",
    "NONE_FOUND",
    "OVERHEAD_SHARE",
    "TF32_SHARE",
    "Cause",
    "CompileFacts",
    "Evidence",
    "Explanation",
    "GraphBreakFact",
    "ModeFacts",
    "Precision",
    "ProfileFacts",
    "explain",
]

#: Every cause, in the order its lines are said.
CAUSES: tuple[Cause, ...] = COMPILE_CAUSES + AMP_CAUSES + PROFILE_CAUSES

#: The line said when a question's causes all stay quiet (``None``: say nothing).
NONE_FOUND: dict[str, Callable[[Evidence], str] | None] = {
    "bench": no_cause_bench,
    "amp": no_cause_amp,
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
