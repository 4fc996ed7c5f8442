"""The one shape of every fix ``%tune`` tries: when not, on and off, its code, ``--apply``.

Each fix says why it is not tried on a step (or nothing), how to put it on and take it off, the
code to paste, and how ``--apply`` applies it in place.

A fix is tried on top of the fixes kept before it (``trial.py``; none: the step as it is):
from the saved state, its first two steps (loss, peak memory), then the kept fixes without it
and with it, interleaved in rounds (``jupyter_gpu.measure.compare``). Whatever a fix runs of its
own (``measure_more``, ``beside``) runs on top of them too: ``Session.kept`` holds them.
:meth:`Fix.applied` is the context each of its timed blocks runs in: it puts the fix on and
takes it back off, untimed, so that between blocks the notebook is as it was; :meth:`Fix.wrap`
changes each call instead (autocast opens per step, as a training loop does).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from .results import DEFAULT_SOURCE

if TYPE_CHECKING:
    from typing import TypeAlias

    from jupyter_gpu.measure import Comparison, Variant

    from .evidence import Evidence
    from .session import Session

    #: The session a fix's trial runs in: one whose variants are made of fixes.
    TuneSession: TypeAlias = Session["Fix"]


class NotApplied(Exception):
    """``--apply`` could not apply a kept fix in place; the message says why, to the user."""


class Fix:
    """One fix (subclasses: one per family's variant). See the module doc."""

    #: What the report calls it ("bf16 autocast").
    name: str = ""
    #: The ``--only``/``--skip`` word of its family ("precision").
    family: str = ""
    #: Its own ``--only``/``--skip`` word ("autocast").
    key: str = ""
    needs_gpu: bool = False
    #: Where it goes when the kept fixes are stacked (lower first; compile last: it wraps the
    #: model the others changed).
    order: int = 50
    #: Untimed calls of each variant before the rounds (``compare``'s ``warmup``).
    warmup: int = 2
    #: The fix does not change what the step computes (the losses should match exactly).
    exact: bool = False
    #: Whose figure the speedup is, for the report.
    source: ClassVar[str] = DEFAULT_SOURCE
    #: Kept when faster, stacked and applied; ``False``: measured and suggested only (it
    #: changes what the step trains on: a larger batch).
    stacks: ClassVar[bool] = True
    #: The loss after one update is compared with the original's (``False``: it cannot be,
    #: e.g. it averages over other samples).
    compares_loss: ClassVar[bool] = True
    #: One of several alternatives (the compile modes): each is timed on top of the kept fixes,
    #: none on top of another, and the best kept one is stacked.
    alternative: ClassVar[bool] = False
    #: The keys of the fixes it is an alternative to (16-bit autocast with channels_last: to
    #: each alone). It is timed on top of the kept fixes less those, and never stacked with
    #: them: the stack takes it, or the kept ones of them, by their gains (``magic._to_stack``).
    replaces: ClassVar[tuple[str, ...]] = ()
    #: It changes only where the step's batches come from, not what a step computes (the input
    #: pipeline). Under another fix, the first steps leave it out: they then draw the original's
    #: first batch, which a loader whose workers augment with their own seeds would not give, so
    #: that the loss is still compared with the original's.
    feeds: ClassVar[bool] = False

    def why_not(self, ev: Evidence) -> str | None:
        """The one line saying why it is not tried on this step, or ``None`` to try it."""
        return None

    def samples_per_call(self, s: TuneSession) -> float:
        """How many times the step's samples one call with the fix does (1: the same).

        Its figure is then per sample: the time ratio times this.
        """
        return 1.0

    def prepare(self, s: TuneSession) -> None:
        """Make what the fix needs, from the state as saved (called after a reset)."""

    def measure_more(self, s: TuneSession) -> list[str]:
        """Figures of its own to report beside the speedup (the loader alone, say)."""
        return []

    def beside(self, s: TuneSession) -> dict[str, Variant]:
        """More variants to time in the same rounds as the speedup (name -> variant)."""
        return {}

    def beside_notes(self, comparison: Comparison) -> list[str]:
        """The figures of :meth:`beside`'s variants, from the comparison they were timed in."""
        return []

    @contextlib.contextmanager
    def applied(self, s: TuneSession) -> Iterator[None]:
        """Put the fix on for a block of steps; take it off after (see the module doc)."""
        yield

    def wrap(self, run: Callable[[], Any]) -> Callable[[], Any]:
        """The call as the fix runs it (by default unchanged)."""
        return run

    def cost_s(
        self, ev: Evidence, seconds: float, rounds: int, step_s: float | None = None
    ) -> float:
        """About how long its trial takes, for the budget (seconds).

        The rounds (at least ``rounds``, each a block of both variants), the warm-up of both,
        the first two steps and the state put back; ``step_s``: a step's time with the kept
        fixes it is timed on top of (default: the step as it was measured).
        """
        step = ev.step_s if step_s is None else step_s
        return max(seconds, 2 * rounds * step) + (2 * self.warmup + 4) * step

    def block_s(self, s: TuneSession) -> float | None:
        """How long one timed block should last, if the fix needs longer ones (seconds).

        For its own trial, and for the kept fixes together against the step as it is.
        """
        return None

    def block_s_under(self, s: TuneSession) -> float | None:
        """The same, while it is among the kept fixes under another fix (on both sides)."""
        return self.block_s(s)

    def calls_under(self, s: TuneSession) -> int | None:
        """Calls a block, the same for both sides, while it is kept under another fix.

        ``None``: blocks last :meth:`block_s_under` seconds instead.
        """
        return None

    def code(self, s: TuneSession) -> list[str]:
        """The line(s) to paste that make the fix in the user's notebook."""
        return []

    def apply(self, s: TuneSession) -> str:
        """Apply it in place (``--apply``) and say what was done.

        Raises:
            NotApplied: it needs the user's code changed; the message says what to paste.
        """
        raise NotApplied(f"{self.name} needs the code changed: paste its line from the cell")

    def release(self, s: TuneSession) -> None:
        """Free what :meth:`prepare` made (workers, a compiled wrapper) when ``%tune`` ends."""
