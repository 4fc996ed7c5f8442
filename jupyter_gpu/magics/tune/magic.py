"""``%tune "step()"``: the fixes for a training step, each tried and measured, ranked, with code.

The flow: read and check the line (``target.py``; a ``UsageError`` changes nothing); open the
repeated runs (``session.py``: they refuse before any run when the step changes what cannot be
put back); measure the step as it is (``baseline.py``); decide what to try (``plan.py``); try
each fix in the plan's order on top of the fixes kept before it (``trial.py``, ``kept.py``),
within the budget; measure the kept fixes together against the step as it is; put everything
back; then ``--apply`` and the report (``report.py``). Ctrl-C stops the runs, puts everything
back and reports what was measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import line_magic, magics_class

from jupyter_gpu.magics.shell.args import (
    ShellMagics,
    argument,
    magic_arguments,
    output_options,
    parse,
)
from jupyter_gpu.magics.shell.lazy_torch import torch_module
from jupyter_gpu.measure import Timing, fmt_ratio

from . import mfu
from .baseline import measure_baseline
from .budget import DEFAULT_S, Budget, describe_s, parse_budget
from .compile import Compile
from .fixes import Fix, NotApplied
from .kept import Kept
from .loader import FIXED, Loader
from .plan import Planned, make_plan, selection
from .progress import Progress
from .report import show_report
from .results import FixResult, NotTried, StackResult, StepProfile, TuneResult
from .session import Session
from .suggest import suggestions
from .target import read_target
from .trial import MIN_ROUNDS, timing_s, trial_block_s, try_fix, try_stack

if TYPE_CHECKING:
    from .fixes import TuneSession

#: Share of the budget kept for measuring the kept fixes together.
STACK_RESERVE = 0.15


def _budget(text: str) -> float:
    return parse_budget(text)


@magics_class
class TuneMagics(ShellMagics):
    """``%tune``."""

    @magic_arguments()
    @argument("step", nargs="*", help='the training step, one expression in quotes: "step()"')
    @argument("--model", metavar="NAME", help="the model the step trains (required)")
    @argument("--optimizer", metavar="NAME", help="the optimizer it steps")
    @argument("--loader", metavar="NAME", help="the DataLoader its batches come from")
    @argument(
        "--batches", metavar="NAME", help="the iterator the step draws batches from with next()"
    )
    @argument(
        "--batch",
        metavar="NAME",
        help="the variable holding the batch size: a larger batch is tried (per sample), then "
        "suggested",
    )
    @argument(
        "--budget",
        type=_budget,
        default=DEFAULT_S,
        metavar="TIME",
        help="how long it may take: 5m, 90s, 1m30s (default 5m)",
    )
    @argument(
        "--only",
        metavar="FIXES",
        help="try only these: loader, precision (tf32, autocast), optimizer, conv "
        "(channels_last, cudnn), threads, batch, compile",
    )
    @argument("--skip", metavar="FIXES", help="do not try these (same words as --only)")
    @argument("--apply", action="store_true", help="apply the kept fixes in place afterwards")
    @output_options()
    @line_magic
    def tune(self, line: str) -> TuneResult | None:
        """Try the fixes for a training step on it, measure each, rank them, give the code.

        %tune "train_step()" --model model --optimizer opt [--batches NAME] [--loader NAME]
        [--batch NAME] [--budget 5m] [--only ...] [--skip ...] [--apply] [-o] [-q]

        Measures the step as it is (its steady time with a 95 % interval; a profile of steady
        steps: GPU idle and why, the DataLoader's share, syncs and their lines; memory; model
        FLOPs and MFU), then tries each fix that the profile says can help: the input pipeline
        (a DataLoader with workers from this kernel's CPU quota, pinned memory, persistent
        workers, prefetching), TF32, bf16 autocast (fp16 where bf16 is not computed), for
        convolution nets the same autocast with channels_last weights, the optimizer fused (or
        foreach), channels_last and cudnn.benchmark for convolutions, CPU
        threads, torch.compile (default; reduce-overhead where the step is launch-bound;
        max-autotune-no-cudagraphs where the budget allows). Each fix, in that order, is timed
        on top of the fixes kept before it: the kept fixes without it against them with it, in
        interleaved rounds (a speedup with its interval: what it adds to them), from the same
        start (the loss after one update compared with the original's; on CUDA the first
        step's peak memory against the kept fixes'). The compile modes are each timed on top of
        the kept others, not of each other; autocast with channels_last on top of the kept
        fixes less autocast or channels_last alone, and stacked in their place where it gains
        more; a larger batch is measured, never kept. Kept:
        measurably faster, loss within 2 %. Then the kept fixes together against the step as it
        is, beside the product of their gains. A fix not tried gets one line saying why.

        Between and after the runs everything is put back (the model, the optimizer, the tensors
        and state the step reaches, the RNG, process-wide settings; --batches NAME and --loader
        NAME as they were). A step that draws batches with next(NAME) is fed by %tune's own
        iterator over the loader being measured: pass --batches NAME. --loader NAME alone: the
        step iterates NAME itself, which is rebound to each new loader.

        Suggested, not applied (they need the code changed): hand-written attention ->
        scaled_dot_product_attention, host syncs with their lines, a larger batch from the free
        memory (with --batch NAME tried first: its figure per sample), torch.compile's graph
        breaks and recompiles. --apply applies the kept fixes that
        can be applied in place and says what it did. Ctrl-C stops, puts everything back and
        reports what was measured. -o returns the result (fixes ranked best first).
        """
        try:
            args = parse(TuneMagics.tune, line)
        except UsageError:
            raise
        try:
            chosen = selection(args.only, args.skip)
        except argparse.ArgumentTypeError as err:
            raise UsageError(str(err)) from None
        torch_module()  # the UsageError that says how to install torch, where it is missing
        target = read_target(self.shell, args)
        budget = Budget(args.budget)
        progress = Progress(self.shell, budget, quiet=args.quiet)
        session = Session[Fix](self.shell, target, budget, progress)
        result = TuneResult(target.expr, target.device, budget_s=args.budget)
        try:
            session.open()  # UsageError here: nothing ran, the names are as they were
        except BaseException:
            progress.close()
            raise
        stacked = self._run(session, result, chosen, args)
        if args.apply and not result.interrupted:
            result.applied = _apply(session, stacked)
        result.elapsed_s = budget.elapsed_s()
        result.stages = list(progress.times)
        if not args.quiet:
            show_report(result)
        return result if args.output else None

    # -------------------------------------------------------------------------- flow

    def _run(
        self, s: TuneSession, result: TuneResult, chosen: set[str], args: argparse.Namespace
    ) -> list[Fix]:
        """Measure, plan, try, stack; always put everything back. The fixes stacked."""
        planned: list[Planned] = []
        stacked: list[Fix] = []
        failure: BaseException | None = None
        assert s.runs is not None
        try:
            with s.runs.recording():
                s.progress.stage("measuring the step as it is")
                try:
                    s.evidence = measure_baseline(s, timing_s=min(1.0, s.budget.seconds / 20))
                except KeyboardInterrupt:
                    raise
                except Exception as err:  # noqa: BLE001  # the user's step failed: say so
                    failure = err
                if s.evidence is not None:
                    s.progress.step()
                    planned = make_plan(s, s.evidence, chosen)
                    stacked = self._try_all(s, result, planned)
        except KeyboardInterrupt:
            result.interrupted = True
            tried = {f.name for f in result.fixes} | {n.name for n in result.not_tried}
            for p in planned:
                if p.why_not is None and p.fix.name not in tried:
                    result.not_tried.append(
                        NotTried(p.fix.name, "not reached: stopped by Ctrl-C", reason="interrupted")
                    )
            stacked = []
        finally:
            for p in planned:
                p.fix.release(s)
            result.restored = s.finish()
            s.close()
            s.progress.close()
        if failure is not None:
            raise UsageError(
                f"{s.target.expr} failed as it is, before any fix "
                f"({type(failure).__name__}: {str(failure)[:300]}): run it in a cell to see the "
                "traceback, fix it, then %tune it. Everything it changed was put back."
            )
        self._finish(s, result, planned, stacked, args)
        return stacked

    def _try_all(self, s: TuneSession, result: TuneResult, planned: list[Planned]) -> list[Fix]:
        """Try each fix the plan allows within the budget, then the kept ones together.

        Each fix is timed on top of the fixes kept before it (``s.kept``, ``kept.py``).
        """
        to_try = [p.fix for p in planned if p.why_not is None]
        for p in planned:
            if p.why_not is not None:
                result.not_tried.append(NotTried(p.fix.name, p.why_not, p.fix.needs_gpu))
        # The baseline, each fix, and the kept fixes together (only where two could be kept).
        s.progress.plan(1 + len(to_try) + (1 if len(to_try) > 1 else 0))
        reserve = STACK_RESERVE * s.budget.seconds
        default_compile_s: float | None = None
        measured: dict[str, Fix] = {}
        for index, fix in enumerate(to_try):
            left = s.budget.left_s() - reserve
            seconds = timing_s(s, len(to_try) - index)
            need = _estimate_s(fix, seconds, s)
            why = _budget_note(fix, left, need, default_compile_s)
            if why is not None:
                result.not_tried.append(NotTried(fix.name, why, fix.needs_gpu, reason="budget"))
                s.progress.skip(fix.name, why)
                continue
            label = f"trying {fix.name}"
            estimate = _trial_estimate_s(fix, need, default_compile_s)
            if estimate is not None:
                result.estimates[label] = estimate
            s.progress.stage(label)
            trial = try_fix(s, fix, seconds=seconds)
            result.fixes.append(trial.result)
            measured[fix.name] = fix
            s.kept = s.kept.after(fix, trial.result.kept, trial.first, trial.step_s)
            if isinstance(fix, Compile) and fix.mode == "default":
                default_compile_s = fix.compile_s
            s.progress.step()
        stacked = _to_stack(s.kept, result.fixes, measured)
        result.fixes = _mark_replaced(result.fixes, stacked, measured)
        loader = next((f for f in stacked if isinstance(f, Loader)), None)
        if len(stacked) == 1:
            only = next(f for f in result.fixes if f.name == stacked[0].name)
            result.stack = _single_stack(only)
            if loader is not None:  # its own rounds timed the step on a fixed batch
                result.stack = _loader_figures(
                    result.stack, loader, loader.fixed_timing, loader.drawing_timing
                )
        elif stacked:
            s.progress.stage("the kept fixes together")
            kept = [f for f in result.fixes if f.name in {x.name for x in stacked}]
            fixed = loader.on_fixed_batch(s, stacked) if loader is not None else None
            stack, comparison = try_stack(
                s,
                stacked,
                kept,
                seconds=timing_s(s, 0),
                beside={FIXED: fixed} if fixed is not None else None,
            )
            if loader is not None and comparison is not None:
                fixed_timing = comparison.timings.get(FIXED)
                stack = _loader_figures(stack, loader, fixed_timing, comparison["together"])
            result.stack = stack
            s.progress.step()
        if len(stacked) < 2:
            s.progress.plan(s.progress.done)  # no stack to time: the stages done were all
        return stacked

    def _finish(
        self,
        s: TuneSession,
        result: TuneResult,
        planned: list[Planned],
        stacked: list[Fix],
        args: argparse.Namespace,
    ) -> None:
        """Rank the fixes, write the code cell, the suggestions and the profile's summary."""
        result.fixes.sort(key=lambda f: (not f.stacked, f.speedup is None, -(f.speedup or 0.0)))
        ev = s.evidence
        lines: list[str] = []
        for fix in sorted(stacked, key=lambda f: f.order):
            lines += fix.code(s)
        if lines:
            together = (
                f" (measured together: {result.stack.ratio.describe()})"
                if result.stack is not None and result.stack.ratio is not None
                else ""
            )
            result.code = "\n".join(
                [f"# the fixes %tune kept for {s.target.expr}{together}", *lines]
            )
        if ev is None:
            return
        reports = {f.mode: f.report for p in planned if isinstance((f := p.fix), Compile)}
        tried_batch = next((f for f in result.fixes if f.family == "batch"), None)
        result.suggestions = suggestions(
            ev, s.target.model, s.target.batch_name, reports, tried_batch
        )
        result.profile = _profile(ev, result, stacked)


def _estimate_s(fix: Fix, seconds: float, s: TuneSession) -> float:
    """About how long ``fix``'s comparison takes (seconds), a compile not counted."""
    assert s.evidence is not None
    # On top of kept fixes, a round times the step with them: faster, so cheaper. But a round
    # also times two blocks at least as long as the trial's block. A kept loader's blocks hold ten
    # steps and four waves of its workers: 0.77 s on the H200's ResNet-50, so at least 18 s of
    # rounds a trial where the step's time alone gave about 2. That run took 4m 16s of its
    # 3-minute budget.
    return max(
        fix.cost_s(s.evidence, seconds, MIN_ROUNDS, step_s=s.kept.step_s),
        2 * MIN_ROUNDS * trial_block_s(s, fix),
    )


def _budget_note(
    fix: Fix, left_s: float, need: float, default_compile_s: float | None
) -> str | None:
    """Why ``fix`` does not fit in the budget left (``None``: it does).

    ``need``: its comparison's estimate (``_estimate_s``), computed once per fix by the caller.
    """
    if isinstance(fix, Compile):  # the compile first, then the same rounds as any fix
        return fix.budget_note(left_s, default_compile_s, comparison_s=need)
    if left_s < need:
        return (
            f"not reached: {describe_s(max(0.0, left_s))} of the budget left for it, under the "
            f"{describe_s(need)} its comparison needs"
        )
    return None


def _trial_estimate_s(fix: Fix, need: float, default_compile_s: float | None) -> float | None:
    """What the budget expected ``fix``'s trial to take: its comparison, and a compile's time.

    ``need``: the comparison's estimate (``_estimate_s``), the one ``_budget_note`` checked.
    """
    if not isinstance(fix, Compile):
        return need
    compile_s = fix.expected_compile_s(default_compile_s)
    return None if compile_s is None else compile_s + need


def _to_stack(kept: Kept[Fix], fixes: list[FixResult], measured: dict[str, Fix]) -> list[Fix]:
    """The fixes to stack, in the order they were kept (``fixes``: in the order tried).

    The kept ones (each timed on top of the ones before it); a kept alternative to some of them
    (``Fix.replaces``: 16-bit autocast with channels_last) in their place, where its gain beats
    the product of theirs (1 where none of them was kept), at the place it was tried in; then
    the best kept compile mode (timed on top of all of them).
    """
    stack = list(kept.fixes)
    gains = {f.name: f.speedup or 1.0 for f in fixes}
    tried = [f.name for f in fixes]
    for result in fixes:
        fix = measured[result.name]
        if not (result.kept and fix.alternative and fix.replaces):
            continue
        singles = [f for f in stack if f.key in fix.replaces]
        if (result.speedup or 0.0) <= math.prod(gains[f.name] for f in singles):
            continue
        stack = [f for f in stack if f not in singles]
        at = sum(1 for f in stack if tried.index(f.name) < tried.index(fix.name))
        stack.insert(at, fix)
    compile_modes = [
        f
        for f in fixes
        if f.kept and measured[f.name].alternative and not measured[f.name].replaces
    ]
    best = max(compile_modes, key=lambda f: f.speedup or 0.0) if compile_modes else None
    return [*stack, *([measured[best.name]] if best is not None else [])]


def _rivals(fix: Fix, other: Fix) -> bool:
    """Whether the stack takes one or the other of ``fix`` and ``other``.

    Two compile modes, or an alternative and a fix it replaces (``Fix.replaces``).
    """
    compile_modes = fix.alternative and other.alternative and not (fix.replaces or other.replaces)
    return compile_modes or fix.key in other.replaces or other.key in fix.replaces


def _mark_replaced(
    fixes: list[FixResult], stacked: list[Fix], measured: dict[str, Fix]
) -> list[FixResult]:
    """The fixes, each kept one the stack left out naming what it took in its place and why.

    Without it the table said "kept" of a fix the code cell did not hold: on a CPU, bf16
    autocast with channels_last measured faster (kept), but bf16 autocast alone gained more,
    and the cell held autocast alone.
    """
    gains = {f.name: f.speedup or 1.0 for f in fixes}
    names = {f.name for f in stacked}
    marked = []
    for result in fixes:
        fix = measured.get(result.name)
        if not result.kept or result.name in names or fix is None or not fix.stacks:
            marked.append(result)
            continue
        rivals = tuple(f.name for f in stacked if _rivals(fix, f))
        if not rivals:  # nothing took its place: it stays as its trial left it
            marked.append(result)
            continue
        theirs = math.prod(gains[n] for n in rivals)
        verdict = (
            f"faster ({fmt_ratio(gains[result.name])}x), but the stack took "
            f"{' with '.join(rivals)} in its place ({fmt_ratio(theirs)}x): it holds one or the "
            "other"
        )
        marked.append(dataclasses.replace(result, replaced_by=rivals, verdict=verdict))
    return marked


def _single_stack(only: FixResult) -> StackResult:
    """One fix kept: its own figure is the stack's (it was timed against the step as it is)."""
    return StackResult(
        (only.name,),
        only.ratio,
        only.speedup or 1.0,
        memory_delta_bytes=only.memory_delta_bytes,
        loss_delta=only.loss_delta,
    )


def _loader_figures(
    stack: StackResult, loader: Loader, fixed: Timing | None, drawing: Timing | None
) -> StackResult:
    """The stack with the kept fixes' step on one fixed batch, and whether the loader limits it."""
    note = loader.limit_note(fixed, drawing)
    return dataclasses.replace(
        stack,
        fixed_batch_step_s=fixed.median_s if fixed is not None else None,
        notes=(*stack.notes, note) if note is not None else stack.notes,
    )


def _apply(s: TuneSession, stacked: list[Fix]) -> list[str]:
    """Apply the stacked fixes in place, in their order (``Fix.order``); a sentence for each."""
    done = []
    for fix in sorted(stacked, key=lambda f: f.order):
        try:
            done.append(f"applied {fix.name}: {fix.apply(s)}")
        except NotApplied as why:
            done.append(f"not applied {fix.name}: {why}")
    return done


def _profile(ev: Any, result: TuneResult, stacked: list[Fix]) -> StepProfile:
    a = ev.analysis
    rows = list(getattr(a, "rows", []) or [])
    if ev.cuda:
        ranked = sorted((r for r in rows if r.on_gpu), key=lambda r: -r.self_gpu_s)
        top = [(r.name, r.self_gpu_s / max(1, a.steps)) for r in ranked[:3]]
    else:
        ranked = sorted((r for r in rows if not r.on_gpu), key=lambda r: -r.self_cpu_s)
        top = [(r.name, r.self_cpu_s / max(1, a.steps)) for r in ranked[:3]]
    flops = ev.flops_per_step
    before = mfu.mfu(flops / ev.step_s if flops else None, ev.gpu_name, ev.matmul_dtype_now())
    after = None
    stack = result.stack
    step_after = stack.step_s if stack is not None else None
    if stack is not None and stack.ratio is not None and step_after is None:
        step_after = ev.step_s / stack.ratio.value
    if step_after:
        after = mfu.mfu(
            flops / step_after if flops else None, ev.gpu_name, _dtype_after(ev, stacked)
        )
    low, high, level = ev.step_interval()
    return StepProfile(
        step_s=ev.step_s,
        step_interval_s=(low, high),
        step_interval_level=level,
        rounds=ev.step.runs,
        steps_profiled=a.steps if a is not None else 0,
        gpu_idle_fraction=ev.gpu_idle,
        idle_split=a.idle_split() if a is not None and ev.cuda else "",
        loader_share=ev.loader_share,
        sync_count=ev.sync_count,
        sync_share=ev.sync_share,
        sync_places=dict(ev.sync_places),
        top_ops=top,
        peak_bytes=ev.first.peak_bytes,
        free_bytes=ev.free_bytes,
        flops_per_step=flops,
        flops_note=ev.flops_note,
        mfu_before=before,
        mfu_after=after,
        analysis=a,
    )


def _dtype_after(ev: Any, stacked: list[Fix]) -> str:
    from .precision import Autocast, Tf32

    for fix in stacked:
        if isinstance(fix, Autocast):
            return fix.dtype
    if any(isinstance(f, Tf32) for f in stacked):
        return "tf32"
    return str(ev.matmul_dtype_now())
