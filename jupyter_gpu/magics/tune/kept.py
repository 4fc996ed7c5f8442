"""The fixes kept so far: what the next fix is timed on top of (greedy trials).

``%tune`` tries its fixes in the plan's order, each on top of the ones kept before it: a fix is
timed as the kept fixes without it against the kept fixes with it, so that its figure is what
it adds to them. Timed against the step as it is instead, a compute fix on a step that waits on
its loader shows almost nothing: the H200's starved ResNet-50 waited 41 ms a batch for its
loader, which hid most of what torch.compile, channels_last and autocast saved (1.16x, 1.11x,
1.05x alone; benchmarks/tune_targets.py). A kept fix joins them, with three exceptions:

- the compile modes are alternatives: each is timed on top of the kept fixes, none on top of
  another (``Fix.alternative``), and the best kept one is stacked;
- a fix that changes what a step trains on (a larger batch, ``Fix.stacks``) is measured and
  suggested, never stacked;
- a fix that failed, or was not measurably faster with the loss within tolerance.

An alternative to some kept fixes (``Fix.replaces``: 16-bit autocast with channels_last, to
each alone) is timed on top of the kept fixes less those (:func:`base_for`), and never joins
them either: the stack takes it in their place where its gain beats theirs.

The loss is still compared with the original's (cumulative: a stack that drifts shows), the
memory change with the kept fixes' first steps (what this fix adds), which the trial that kept
the last fix measured: no run of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from .evidence import FirstSteps


class KeptFix(Protocol):
    """What the kept fixes read of a fix (``fixes.Fix`` is one): its name and how it stacks.

    A protocol, not ``Fix`` itself, so that this module (and the session that holds the kept
    fixes) needs nothing of the fixes' module, which needs the session.
    """

    @property
    def name(self) -> str: ...

    @property
    def stacks(self) -> bool: ...

    @property
    def key(self) -> str: ...

    @property
    def alternative(self) -> bool: ...

    @property
    def replaces(self) -> tuple[str, ...]: ...

    @property
    def feeds(self) -> bool: ...


F = TypeVar("F", bound=KeptFix)

#: The name of the baseline variant when no fix is kept yet.
AS_IS = "as is"
#: The name of the baseline variant on top of kept fixes.
KEPT = "the kept fixes"


@dataclass(frozen=True)
class Kept(Generic[F]):
    """The kept fixes, in the order they were kept (none: the step as it is).

    ``first``: their first two steps, as :func:`first_fixes` takes them (``None``: the step as
    it is, ``Session.base_first``); ``step_s``: the step's seconds with them, the median per
    call of the trial that kept the last (``None``: as it is, the evidence's figure).
    """

    fixes: tuple[F, ...] = ()
    first: FirstSteps | None = None
    step_s: float | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fixes)

    @property
    def label(self) -> str:
        """The baseline variant's name in a comparison."""
        return KEPT if self.fixes else AS_IS

    def after(self, fix: F, kept: bool, first: FirstSteps | None, step_s: float | None) -> Kept[F]:
        """The kept fixes after ``fix``'s trial (``kept``: its verdict), see the module doc.

        ``first``: its first two steps; ``step_s``: its step's median seconds a call. A fix that
        only feeds batches leaves ``first`` as it was: first steps leave it out.
        """
        if not kept or not fix.stacks or fix.alternative:
            return self
        return Kept(
            (*self.fixes, fix),
            self.first if fix.feeds else first,
            step_s,
        )


def base_for(kept: Kept[F], fix: F) -> Kept[F]:
    """The kept fixes ``fix`` is timed on top of: all of them, less those it replaces.

    A fix that is an alternative to some of them (``Fix.replaces``: 16-bit autocast with
    channels_last, to each alone) is not timed on top of them. Less some, the first steps kept
    from the last trial are not theirs (``first`` ``None``: the trial takes its own where any
    fix is left that first steps run with).
    """
    fixes = tuple(f for f in kept.fixes if f.key not in fix.replaces)
    if len(fixes) == len(kept.fixes):
        return kept
    return Kept(fixes, None, kept.step_s)


def first_fixes(under: Sequence[F], fix: F | None = None) -> list[F]:
    """The fixes a variant's first steps run with: ``under`` less those that only feed batches.

    ``fix`` (the one tried) is always on. A kept input pipeline is left out: it changes where
    the batches come from, not what a step computes, and its workers may augment with seeds of
    their own, so that a first batch from it would differ from the original's and leave the
    loss uncompared (``Fix.feeds``).
    """
    return [f for f in under if not f.feeds] + ([fix] if fix is not None else [])
