"""Trying one fix on top of the fixes kept before it, and the kept fixes together.

A fix's trial, inside the session's repeated runs, with ``Session.kept`` the fixes kept before it
(``kept.py``; none: the step as it is):

1. back to the saved state; the kept fixes and the fix make what they need (``prepare``), and
   the fix its own figures (``measure_more``: the loader alone, the first compiled call), with
   the kept fixes on;
2. back to the saved state again (and made afresh: ``measure_more`` may have stepped a rebuilt
   optimizer); its first two steps with the kept fixes on: the loss after one update (compared
   with the original's from the same start: cumulative), the first step's time and, on CUDA,
   its peak (against the kept fixes' first steps: what it adds);
3. the kept fixes without it and with it, interleaved in rounds
   (``jupyter_gpu.measure.compare``): the speedup and its interval, what it adds to them.

A fix that is an alternative to some kept fixes (``Fix.replaces``) is tried on top of the others
alone (``kept.base_for``), with their first steps taken anew for its memory change.

Kept: measurably faster (the interval above 1) and the loss within :data:`LOSS_RTOL` of the
original's. The stack, every kept fix on (of the compile modes the best kept one), is measured
against the step as it is, beside the product of the fixes' gains.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jupyter_gpu.magics.output.render import fmt_bytes
from jupyter_gpu.measure import Comparison, Ratio, Variant, compare

from .evidence import FirstSteps
from .kept import AS_IS, base_for, first_fixes
from .results import FixResult, StackResult

if TYPE_CHECKING:
    from .fixes import Fix, TuneSession

#: Fewest rounds of a comparison: 12 give a 95 % interval that leaves out the two most extreme
#: rounds on each side (8, compare's own floor, give the whole range at 99 %), which a busy
#: machine's outliers would otherwise set.
MIN_ROUNDS = 12
#: A loss after one update within this share of the original's is "within tolerance": bf16's
#: 8-bit mantissa alone moves a first step's loss by about 0.4 % per rounding.
LOSS_RTOL = 0.02


def _same_batch(a: Any, b: Any) -> bool | None:
    """Whether two batches hold the same values (``None`` where it cannot tell)."""
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return bool(a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.cpu(), b.cpu()))
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            return False
        parts = [_same_batch(x, y) for x, y in zip(a, b, strict=True)]
        return None if None in parts else all(parts)
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return False
        parts = [_same_batch(a[k], b[k]) for k in a]
        return None if None in parts else all(parts)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001  # an object without a plain ==: cannot tell
        return None


def loss_check(base: FirstSteps, got: FirstSteps) -> tuple[float | None, bool, str]:
    """``(loss_delta, within tolerance, note)`` of a variant's first steps against the original.

    The loss compared is the one after one update (the second step's), so that a fix to the
    optimizer shows too. Where the first batches differ (a loader whose workers augment with
    their own seeds), the losses are not comparable: no delta, and the note says why.
    """
    if base.batch is not None or got.batch is not None:
        same = _same_batch(base.batch, got.batch)
        if same is False:
            return None, True, "not compared: its first batch differs from the original's"
    if base.loss is None or got.loss is None:
        return None, True, "not compared: the step returns no loss"
    delta = got.loss - base.loss
    if not math.isfinite(got.loss):
        return delta, False, f"the loss is {got.loss} where it was {base.loss:.6g}"
    within = abs(delta) <= LOSS_RTOL * max(abs(base.loss), 1e-12)
    if within:
        return delta, True, ""
    return (
        delta,
        False,
        (
            f"the loss after one update is {got.loss:.6g} against {base.loss:.6g} as it was "
            f"({abs(delta) / max(abs(base.loss), 1e-12):.1%} off; tolerance {LOSS_RTOL:.0%})"
        ),
    )


def timing_s(s: TuneSession, left_fixes: int) -> float:
    """Seconds for one comparison: about 2, less when the budget is short (0.3 at least)."""
    return min(2.0, max(0.3, s.budget.left_s() / (left_fixes + 1) / 3))


@dataclass(frozen=True)
class Trial:
    """One fix's trial: its result, and what the next fixes need if it is kept.

    ``first``: its first two steps (``None``: it failed before them); ``step_s``: the step's
    median seconds a call with it on, from the rounds (``None``: not timed).
    """

    result: FixResult
    first: FirstSteps | None = None
    step_s: float | None = None


def _prepared(s: TuneSession, fixes: Sequence[Fix]) -> None:
    """Back to the saved state, and each fix makes what it needs from there."""
    s.reset()
    for fix in fixes:
        fix.prepare(s)


def block_s_for(s: TuneSession, fix: Fix) -> float:
    """How long a block of ``fix``'s trial lasts: what it asks, or what a kept fix under it asks.

    A kept input pipeline asks for long blocks (ten steps, four waves of its workers:
    ``Loader.block_s_under``), so every fix timed on top of it costs that many seconds a round.
    """
    under = base_for(s.kept, fix).fixes
    return max([fix.block_s(s) or 0.01, *((f.block_s_under(s) or 0.01) for f in under)])


def calls_for(s: TuneSession, fix: Fix) -> int | None:
    """Calls a block of ``fix``'s trial where a kept fix under it asks for a count, else ``None``.

    A kept loader over a short epoch asks for whole epochs (``Loader.calls_under``). Not for a
    fix that sizes its own blocks (the loader; a larger batch, which draws from a loader of its
    own): the kept loader's epoch is not its epoch.
    """
    if fix.feeds or fix.block_s(s) is not None:
        return None
    under = base_for(s.kept, fix).fixes
    asked = [c for f in under if (c := f.calls_under(s)) is not None]
    return max(asked) if asked else None


def trial_block_s(s: TuneSession, fix: Fix) -> float:
    """About how long a block of ``fix``'s trial lasts (seconds): for the budget."""
    calls = calls_for(s, fix)
    step = s.kept.step_s or 0.0
    return max(block_s_for(s, fix), (calls or 0) * step)


def try_fix(s: TuneSession, fix: Fix, *, seconds: float) -> Trial:
    """Measure ``fix`` on top of ``s.kept`` (see the module doc). Errors are results."""
    assert s.base_first is not None
    kept = base_for(s.kept, fix)  # less the kept fixes it is an alternative to
    under = kept.fixes
    on = [*under, fix]
    code = "\n".join(fix.code(s))
    try:
        _prepared(s, on)
        notes = fix.measure_more(s)
        base_first = kept.first or s.base_first
        if kept.first is None and first_fixes(under):  # less some: their first steps, anew
            _prepared(s, under)
            base_first = s.first_steps(first_fixes(under))
        _prepared(s, on)
        first = s.first_steps(first_fixes(under, fix))
    except Exception as err:  # noqa: BLE001  # a fix that fails on this step is a result
        return Trial(_failed(fix, code, err, kept.names))
    try:
        comparison = compare(
            {kept.label: s.variant(under), fix.name: s.variant(on), **fix.beside(s)},
            device=s.target.device,
            warmup=max(f.warmup for f in on),
            target_s=seconds,
            block_s=block_s_for(s, fix),
            calls=calls_for(s, fix),
            min_rounds=MIN_ROUNDS,
            on_round=s.progress.on_round,
        )
    except Exception as err:  # noqa: BLE001
        return Trial(_failed(fix, code, err, kept.names), first)
    ratio = comparison.ratio(fix.name)
    notes = [*notes, *fix.beside_notes(comparison)]
    samples = fix.samples_per_call(s)
    if samples != 1.0:
        # x2, not x2.00: a batch's factor, not a measured ratio
        notes = [*notes, f"per call (a step): {ratio.describe()}; per sample: x{samples:.3g}"]
        ratio = per_sample(ratio, samples)
    if fix.compares_loss:
        delta, within, loss_note = loss_check(s.base_first, first)
    else:
        delta, within = None, True
        loss_note = "not compared: the loss averages over other samples"
    memory = _memory_delta(base_first, first)
    if not ratio.faster:
        verdict = "not kept: " + ("slower" if ratio.slower else "no measurable difference")
    elif not within:
        verdict = f"not kept: {loss_note}"
    elif not fix.stacks:
        verdict = "suggested: it changes what a step trains on (not stacked)"
    else:
        verdict = "kept"
    if not comparison.machine.steady:
        notes = [*notes, *comparison.machine.notes]
    result = FixResult(
        fix.name,
        fix.family,
        ratio.value,
        (ratio.low, ratio.high),
        memory,
        delta,
        verdict == "kept",
        code,
        verdict,
        ratio=ratio,
        source=fix.source,
        first_step_s=first.first_s,
        loss_note=loss_note,
        notes=tuple(notes),
        on_top_of=kept.names,
    )
    return Trial(result, first, comparison[fix.name].median_s)


def per_sample(ratio: Ratio, samples: float) -> Ratio:
    """A per-call ratio as a per-sample one (its interval too).

    A call of the variant does ``samples`` times the samples of a call of the baseline, so its
    samples per second are ``ratio * samples`` times the baseline's.
    """
    return dataclasses.replace(
        ratio, value=ratio.value * samples, low=ratio.low * samples, high=ratio.high * samples
    )


def _memory_delta(base: FirstSteps, got: FirstSteps) -> int | None:
    if base.peak_bytes is None or got.peak_bytes is None:
        return None
    return got.peak_bytes - base.peak_bytes


def _failed(fix: Fix, code: str, err: BaseException, on_top_of: tuple[str, ...]) -> FixResult:
    text = f"{type(err).__name__}: {str(err).strip().splitlines()[0][:200] if str(err) else ''}"
    return FixResult(
        fix.name,
        fix.family,
        None,
        None,
        None,
        None,
        False,
        code,
        f"failed: {text}",
        source=fix.source,
        error=text,
        on_top_of=on_top_of,
    )


def try_stack(
    s: TuneSession,
    fixes: Sequence[Fix],
    parts: Sequence[FixResult],
    *,
    seconds: float,
    beside: Mapping[str, Variant] | None = None,
) -> tuple[StackResult, Comparison | None]:
    """The kept fixes together against the step as it is, beside the product of their gains.

    Each part's gain was timed on top of the parts kept before it, so their product is what
    they should give together if nothing drifted between the trials. ``beside``: more variants
    timed in the same rounds (the kept fixes on one fixed batch). Returns the comparison too
    (``None`` where it failed).
    """
    assert s.base_first is not None
    names = tuple(f.name for f in fixes)
    product = math.prod(p.speedup or 1.0 for p in parts)
    try:
        _prepared(s, fixes)
        s.reset()
        first = s.first_steps(first_fixes(fixes))
        comparison = compare(
            {AS_IS: s.variant([]), "together": s.variant(fixes), **(beside or {})},
            device=s.target.device,
            warmup=max(f.warmup for f in fixes),
            target_s=seconds,
            block_s=max((f.block_s(s) or 0.01) for f in fixes),
            min_rounds=MIN_ROUNDS,
            on_round=s.progress.on_round,
        )
    except Exception as err:  # noqa: BLE001  # the fixes together failing is a result too
        error = f"{type(err).__name__}: {err}"[:240]
        return StackResult(names, None, product, error=error), None
    delta, _within, _note = loss_check(s.base_first, first)
    stack = StackResult(
        names,
        comparison.ratio("together"),
        product,
        memory_delta_bytes=_memory_delta(s.base_first, first),
        loss_delta=delta,
        step_s=comparison["together"].median_s,
    )
    return stack, comparison


def memory_text(delta: int | None) -> str:
    """``+1.2 GiB`` / ``-300.0 MiB`` / ``n/a`` for the table."""
    if delta is None:
        return "n/a"
    return ("+" if delta >= 0 else "-") + fmt_bytes(abs(delta))
