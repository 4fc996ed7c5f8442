"""``%tune``'s result set beside notebook 07's hand-made climb, row by row.

The climb times each fix against the row before it (the step as the fixes above had left it);
``%tune`` times each of its fixes on top of the fixes it kept before it (the step it was given,
the climb's start, while it has kept none). So a row and its ``%tune`` fix share a baseline
where the changes under each are the same: the climb's kept rows above it are the ``%tune``
fixes under the fix (TF32 under autocast in both, say); elsewhere the two figures answer
different questions, and each line says which step each was measured against.
The climb's other rows change the code (the attention, the ``.item()``, the model's shape...):
``%tune`` suggests two of them from its profile and has no fix for the rest; each line says which.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The climb's rows that change the code: the name of the ``%tune`` suggestion that names the
#: same change, or ``None`` and why ``%tune`` has nothing for it.
CODE_CHANGES: dict[str, tuple[str | None, str]] = {
    "sdpa": ("scaled_dot_product_attention", "the attention is the model's code"),
    "no-item": ("no host syncs", "the .item() is the step's code"),
    "shape": (None, "the model's shape is its code: %tune does not change it"),
    "attention": (None, "the attention backend is picked in the code (sdpa_kernel)"),
    "batch": ("a larger batch", "a larger batch changes what a step trains on"),
    "checkpointing": (None, "activation checkpointing is the model's code"),
    "float8": (None, "FP8 swaps the model's Linear modules (torchao): not a %tune fix"),
    "compiled-optimizer": (None, "compiling the optimizer's step is not a %tune fix"),
}


#: How a ``%tune`` fix's name maps to the climb's row: (test, text, row key), the first that
#: holds wins (``torch.compile`` alone is the default mode; its other modes name themselves).
_ROW_KEYS: tuple[tuple[Callable[[str, str], bool], str, str], ...] = (
    (str.startswith, "TF32", "tf32"),
    (str.endswith, "autocast", "autocast"),
    (str.__eq__, "torch.compile", "compile"),
    (str.__eq__, "torch.compile reduce-overhead", "cuda-graphs"),
    (str.startswith, "torch.compile max-autotune", "autotune"),
    (str.endswith, " optimizer", "fused"),
    (str.__eq__, "input pipeline", "pipeline"),
)


def row_key(fix_name: str) -> str | None:
    """The climb's row key for one of ``%tune``'s fixes, ``None`` for a fix the climb lacks."""
    return next((key for test, text, key in _ROW_KEYS if test(fix_name, text)), None)


@dataclass(frozen=True)
class Beside:
    """One climb row beside what ``%tune`` measured or said for the same change.

    ``same_baseline``: both figures are against the same step (the same changes under each);
    ``overlap``: both intervals share a value (``None`` where there are not two figures).
    """

    label: str
    climb: str
    tune: str
    same_baseline: bool = False
    overlap: bool | None = None

    def line(self) -> str:
        if self.overlap is None:
            agreement = ""
        elif self.same_baseline:
            agreement = "; the same baseline, " + (
                "the intervals overlap" if self.overlap else "the intervals do not overlap"
            )
        else:
            agreement = "; different baselines: the figures answer different questions"
        return f"{self.label}: the climb {self.climb}; %tune {self.tune}{agreement}"


def beside(tuned: Any, climb: Any) -> list[Beside]:
    """A line per climb row after the start (``tuned``: ``%tune -o``'s result)."""
    fixes = {row_key(f.name): f for f in tuned.fixes if row_key(f.name) is not None}
    not_tried = {row_key(n.name): n for n in tuned.not_tried if row_key(n.name) is not None}
    suggested = {s.name: s for s in tuned.suggestions}
    start = climb.start
    lines = []
    for row in climb.rows:
        if row is start:
            continue
        before = climb.before(row)
        kept = "" if row.kept else ", not kept"
        against = "the start" if before is None or before is start else f"row {before.label!r}"
        figure = row.gain.describe() if row.gain is not None else "not timed"
        climb_text = f"{figure} against {against}{kept}"
        fix = fixes.get(row.key)
        if fix is not None and fix.ratio is not None:
            a, b = fix.ratio, row.gain
            overlap = None if b is None else max(a.low, b.low) <= min(a.high, b.high)
            under = fix.on_top_of
            on = "the start" if not under else f"the start with {' + '.join(under)}"
            tune = f"{fix.ratio.describe()} against {on} ({'kept' if fix.stacked else fix.verdict})"
            above = climb.rows[: climb.rows.index(row)]
            climb_under = {r.key for r in above if r.kept and r is not start}
            same = {row_key(name) for name in under} == climb_under
            lines.append(Beside(row.label, climb_text, tune, same, overlap))
        elif fix is not None:
            lines.append(Beside(row.label, climb_text, f"failed: {fix.verdict}"))
        elif row.key in not_tried:
            lines.append(Beside(row.label, climb_text, f"not tried: {not_tried[row.key].why}"))
        elif row.key in CODE_CHANGES:
            name, why = CODE_CHANGES[row.key]
            found = suggested.get(name) if name is not None else None
            tune = (
                f"suggests it ({why}): {found.text}"
                if found is not None
                else f"has no fix for it ({why})"
                if name is None
                else f"did not suggest it ({why})"
            )
            lines.append(Beside(row.label, climb_text, tune))
        else:
            lines.append(Beside(row.label, climb_text, "did not try it"))
    return lines
