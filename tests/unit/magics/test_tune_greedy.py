"""``%tune``'s greedy trials without a shell: what a fix is timed on top of, what is stacked, the
report's "on top of", and the line saying that the new loader now limits the step.

Real fix objects and real timings; the trials themselves run in tests/integration/magics.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from jupyter_gpu.host.cpus import CpuBudget, worker_count
from jupyter_gpu.magics.tune.autocast_nhwc import AutocastChannelsLast
from jupyter_gpu.magics.tune.batch_size import LargerBatch
from jupyter_gpu.magics.tune.batches import LoaderAlone
from jupyter_gpu.magics.tune.compile import AUTOTUNE_FACTOR, MIN_COMPILE_S, Compile
from jupyter_gpu.magics.tune.conv import ChannelsLast
from jupyter_gpu.magics.tune.evidence import FirstSteps
from jupyter_gpu.magics.tune.kept import AS_IS, KEPT, Kept, base_for, first_fixes
from jupyter_gpu.magics.tune.loader import BLOCK_BATCHES, WAVES, Loader
from jupyter_gpu.magics.tune.magic import (
    _budget_note,
    _estimate_s,
    _mark_replaced,
    _to_stack,
    _trial_estimate_s,
)
from jupyter_gpu.magics.tune.precision import Autocast
from jupyter_gpu.magics.tune.report import ON_TOP, fixes_table, stack_line
from jupyter_gpu.magics.tune.results import FixResult, StackResult, TuneResult
from jupyter_gpu.magics.tune.trial import MIN_ROUNDS, block_s_for, calls_for, trial_block_s
from jupyter_gpu.measure import Timing
from jupyter_gpu.measure.interval import Ratio


def _first(peak_bytes: int) -> FirstSteps:
    return FirstSteps((1.0, 0.9), 0.02, peak_bytes)


def _loader() -> Loader:
    return Loader(worker_count(budget=CpuBudget(affinity=4, quota=None)))  # 3 workers


def test_a_kept_fix_joins_the_base_but_a_compile_mode_or_a_larger_batch_never_does() -> None:
    loader, autocast, channels = _loader(), Autocast("bf16", "cpu"), ChannelsLast()
    kept = Kept()
    assert (kept.names, kept.label, kept.first, kept.step_s) == ((), AS_IS, None, None)
    kept = kept.after(loader, True, _first(100), 0.05)
    assert kept.names == ("input pipeline",)
    assert kept.label == KEPT
    assert kept.step_s == 0.05  # the next trials' rounds are this fast: the budget's figure
    assert kept.first is None  # the loader only feeds: first steps leave it out (the original's)
    assert kept.after(autocast, False, _first(60), 0.04) is kept  # not kept: nothing joins
    kept = kept.after(autocast, True, _first(60), 0.03)
    assert kept.names == ("input pipeline", "bf16 autocast")
    assert kept.first is not None
    assert kept.first.peak_bytes == 60  # the next fix's memory change is against this
    # Alternatives (the compile modes) and fixes that do not stack (a larger batch) never join:
    # each compile mode is timed on top of the same kept fixes, none on top of another.
    assert kept.after(Compile("default"), True, _first(70), 0.01) is kept
    assert kept.after(Compile("reduce-overhead"), True, _first(70), 0.01) is kept
    assert kept.after(LargerBatch(), True, _first(200), 0.1) is kept
    kept = kept.after(channels, True, _first(55), 0.02)
    assert kept.names == ("input pipeline", "bf16 autocast", "channels_last")
    # A variant's first steps leave the loader out: they draw the original's first batch.
    compiled = Compile("default")
    assert first_fixes(kept.fixes, compiled) == [autocast, channels, compiled]
    assert first_fixes(kept.fixes) == [autocast, channels]


def _result(name: str, family: str, speedup: float, *, kept: bool = True) -> FixResult:
    ratio = Ratio(speedup, speedup * 0.95, speedup * 1.05, 12, 0.96)
    interval = (ratio.low, ratio.high)
    verdict = "kept" if kept else "not kept: slower"
    return FixResult(name, family, speedup, interval, None, 0.0, kept, "", verdict, ratio)


def test_the_stack_is_the_kept_fixes_in_the_order_kept_then_the_best_compile_mode() -> None:
    loader, channels = _loader(), ChannelsLast()
    default, overhead = Compile("default"), Compile("reduce-overhead")
    kept = Kept((loader, channels))
    fixes = [
        _result("input pipeline", "loader", 1.9),
        _result("channels_last", "conv", 1.2),
        _result("torch.compile", "compile", 1.3),
        _result("torch.compile reduce-overhead", "compile", 1.6),
    ]
    measured = {f.name: f for f in (loader, channels, default, overhead)}
    assert _to_stack(kept, fixes, measured) == [loader, channels, overhead]
    fixes[3] = _result("torch.compile reduce-overhead", "compile", 0.9, kept=False)
    assert _to_stack(kept, fixes, measured) == [loader, channels, default]


def test_autocast_with_channels_last_is_an_alternative_to_each_alone() -> None:
    loader, autocast, channels = _loader(), Autocast("bf16", "cpu"), ChannelsLast()
    both = AutocastChannelsLast("bf16", "cpu")
    assert both.name == "bf16 autocast with channels_last"
    kept = Kept((loader, autocast), _first(60), 0.03)
    # Timed on top of the kept fixes less a kept autocast (its first steps taken anew) ...
    base = base_for(kept, both)
    assert (base.names, base.first, base.step_s) == (("input pipeline",), None, 0.03)
    assert base_for(kept, channels) is kept  # a fix that replaces nothing: all of them
    # ... and never joins them: channels_last, tried after it, is not timed on top of it.
    assert kept.after(both, True, _first(50), 0.02) is kept
    assert base_for(Kept((loader, channels)), both).names == ("input pipeline",)


def test_the_stack_takes_autocast_with_channels_last_where_it_beats_the_singles() -> None:
    loader, autocast, channels = _loader(), Autocast("bf16", "cpu"), ChannelsLast()
    both, default = AutocastChannelsLast("bf16", "cpu"), Compile("default")
    measured = {f.name: f for f in (loader, autocast, both, channels, default)}

    def tried(autocast_gain: float, both_gain: float, channels_gain: float) -> list[FixResult]:
        # In the order tried: autocast alone, then both, then channels_last alone, then compile.
        return [
            _result("input pipeline", "loader", 1.9),
            _result("bf16 autocast", "precision", autocast_gain, kept=autocast_gain > 1),
            _result("bf16 autocast with channels_last", "precision", both_gain, kept=both_gain > 1),
            _result("channels_last", "conv", channels_gain, kept=channels_gain > 1),
            _result("torch.compile", "compile", 1.3),
        ]

    # The H200's ResNet-50: neither alone kept; both together kept, in the place it was tried.
    fixes = tried(0.88, 1.4, 1.02)
    assert _to_stack(Kept((loader,)), fixes, measured) == [loader, both, default]
    # Both singles kept, their product (1.1 x 1.2) beating it: the singles stay.
    fixes = tried(1.1, 1.3, 1.2)
    stack = _to_stack(Kept((loader, autocast, channels)), fixes, measured)
    assert stack == [loader, autocast, channels, default]
    # Beating their product: it takes their place.
    fixes = tried(1.1, 1.5, 1.2)
    stack = _to_stack(Kept((loader, autocast, channels)), fixes, measured)
    assert stack == [loader, both, default]
    # Not kept: never stacked.
    fixes = tried(1.1, 0.9, 1.2)
    stack = _to_stack(Kept((loader, autocast, channels)), fixes, measured)
    assert stack == [loader, autocast, channels, default]


def test_a_kept_fix_the_stack_left_out_says_what_it_took_instead() -> None:
    """The code cell and the table agree: "kept" is what the cell holds.

    On a CPU in CI, bf16 autocast with channels_last measured faster (kept in its trial) but
    autocast alone gained more, and the table said "kept" of both while the cell held one.
    """
    loader, autocast, channels = _loader(), Autocast("bf16", "cpu"), ChannelsLast()
    both, default, overhead = (
        AutocastChannelsLast("bf16", "cpu"),
        Compile("default"),
        Compile("reduce-overhead"),
    )
    measured = {f.name: f for f in (loader, autocast, both, channels, default, overhead)}
    fixes = [
        _result("input pipeline", "loader", 1.9),
        _result("bf16 autocast", "precision", 2.5),
        _result("bf16 autocast with channels_last", "precision", 2.1),
        _result("channels_last", "conv", 0.9, kept=False),
        _result("torch.compile", "compile", 1.3),
        _result("torch.compile reduce-overhead", "compile", 1.6),
    ]
    stack = _to_stack(Kept((loader, autocast)), fixes, measured)
    assert stack == [loader, autocast, overhead]
    marked = {f.name: f for f in _mark_replaced(fixes, stack, measured)}
    loser = marked["bf16 autocast with channels_last"]
    assert loser.kept  # faster in its trial ...
    assert not loser.stacked  # ... but not in the cell
    assert loser.replaced_by == ("bf16 autocast",)
    assert loser.verdict.startswith("faster (2.10x), but the stack took bf16 autocast in its")
    assert marked["torch.compile"].replaced_by == ("torch.compile reduce-overhead",)
    for name in ("input pipeline", "bf16 autocast", "torch.compile reduce-overhead"):
        assert marked[name] is next(f for f in fixes if f.name == name)  # untouched
    assert not marked["channels_last"].replaced_by  # not kept: its verdict says so already
    result = TuneResult("step()", "cpu", fixes=list(marked.values()))
    assert [f.name for f in result.kept] == [f.name for f in stack]
    column = {row[1]: row[6] for row in fixes_table(result).rows}
    assert column["bf16 autocast"] == "yes"
    assert column["bf16 autocast with channels_last"].startswith("faster (2.10x), but the stack")
    assert column["channels_last"] == "slower"
    # Beating the singles, it takes their place, and they say so.
    fixes[2] = _result("bf16 autocast with channels_last", "precision", 2.8)
    stack = _to_stack(Kept((loader, autocast)), fixes, measured)
    assert stack == [loader, both, overhead]
    marked = {f.name: f for f in _mark_replaced(fixes, stack, measured)}
    assert marked["bf16 autocast"].replaced_by == ("bf16 autocast with channels_last",)
    assert marked["bf16 autocast with channels_last"].stacked


def test_the_table_says_what_each_fix_was_timed_on_top_of() -> None:
    fixes = [
        _result("input pipeline", "loader", 1.9),
        replace(_result("channels_last", "conv", 1.2), on_top_of=("input pipeline",)),
        replace(
            _result("torch.compile", "compile", 1.3),
            on_top_of=("input pipeline", "channels_last"),
        ),
    ]
    table = fixes_table(TuneResult("step()", "cuda", fixes=fixes))
    assert table.headers[-1] == "on top of"
    assert [row[-1] for row in table.rows] == [
        "the step as it is",
        "input pipeline",
        "input pipeline + channels_last",
    ]
    assert "on top of the fixes kept before it" in ON_TOP
    stack = StackResult(
        ("input pipeline", "channels_last", "torch.compile"),
        Ratio(3.0, 2.9, 3.1, 12, 0.96),
        1.9 * 1.2 * 1.3,
    )
    line = stack_line(stack, None)
    assert "against the step as it is: 3.00x faster" in line
    assert "beside 2.96x, the product of their speedups, each timed on top of the ones kept" in line


def _timing(seconds: float) -> Timing:
    return Timing(tuple(seconds * (1 + 0.01 * (i % 3)) for i in range(12)), 2)


def test_the_new_loader_limits_the_step_only_where_the_figures_of_the_run_say_so() -> None:
    loader = _loader()
    loader.alone = (LoaderAlone(0.5, 0.080, 64), LoaderAlone(0.3, 0.030, 64))
    fixed, drawing = _timing(0.010), _timing(0.031)
    line = loader.limit_note(fixed, drawing)
    assert line is not None
    assert line.startswith("the new loader now limits the step: alone (no step), with 3 worker(s)")
    assert "it made a batch every 30.0 ms" in line
    assert "on one fixed batch (no loading): 10.1 ms" in line  # the median of the rounds
    assert "drawing from it, a step took 31.3 ms" in line
    # The loader alone faster than the step with the kept fixes: nothing to say.
    loader.alone = (loader.alone[0], LoaderAlone(0.3, 0.008, 64))
    assert loader.limit_note(fixed, drawing) is None
    # Within the fixed-batch step's interval: not measurably slower, nothing said.
    loader.alone = (loader.alone[0], LoaderAlone(0.3, 0.0101, 64))
    assert loader.limit_note(fixed, drawing) is None
    # Without the figures (no fixed batch), or a loader alone timed short of a steady count.
    loader.alone = (loader.alone[0], LoaderAlone(0.3, 0.030, 64))
    assert loader.limit_note(None, drawing) is None
    loader.alone = (loader.alone[0], LoaderAlone(0.3, 0.030, 5, short="the epoch ended"))
    assert loader.limit_note(fixed, drawing) is None


def test_under_a_kept_loader_blocks_hold_ten_steps_and_four_waves_and_a_larger_batch_as_many() -> (
    None
):
    loader = _loader()
    assert loader.workers == 3
    loader.alone = (LoaderAlone(0.5, 0.040, 64), LoaderAlone(0.3, 0.005, 64))
    session = SimpleNamespace(kept=Kept((loader,)))
    assert loader.block_s(session) == BLOCK_BATCHES * 0.040  # its own trial: the old loader's
    # Under others: four waves of its 3 workers (12 of its batches) beat ten of its batches...
    assert loader.block_s_under(session) == pytest.approx(WAVES * 3 * 0.005)
    # ... and ten steps with the kept fixes beat both, where the step is the slower (the H200's
    # ResNet-50: 14.7 ms a batch, 38-58 ms a step; ten batches held about 3 steps a block).
    slow_steps = SimpleNamespace(kept=Kept((loader,), None, 0.040))
    assert loader.block_s_under(slow_steps) == pytest.approx(BLOCK_BATCHES * 0.040)
    larger = LargerBatch()
    larger.size, larger.new_size = 64, 256
    # Four times the samples a batch: a block under the kept loader holds as many batches of 256
    # as it would of 64, so that the larger batch's loader shows its pace as the kept one does.
    assert larger.block_s(session) == pytest.approx(WAVES * 3 * 0.005 * 4)
    assert larger.block_s(SimpleNamespace(kept=Kept())) is None


def comparison(fix: Any, session: Any) -> float:
    """What the budget expects ``fix``'s rounds to take, with a 2 s timing (as %tune does)."""
    return _estimate_s(fix, 2.0, session)


def test_the_budget_counts_the_long_blocks_a_kept_loader_asks_of_every_trial_on_top_of_it() -> None:
    # The H200's ResNet-50: the kept loader's 8 workers made a batch every 23.9 ms, so its blocks
    # last four waves (0.77 s); the step with it took 55 ms. The step's time alone put a trial at
    # about 2 s; its rounds took at least 2 x 12 blocks, 18 s, and the run overran its budget.
    loader = Loader(worker_count(budget=CpuBudget(affinity=16, quota=None)))  # 8, the cap
    loader.alone = (LoaderAlone(0.05, 0.056, 19), LoaderAlone(0.305, 0.0239, 43))
    autocast = Autocast("bf16", "cpu")
    session = SimpleNamespace(
        kept=Kept((loader,), None, 0.055), evidence=SimpleNamespace(step_s=0.122)
    )
    block = block_s_for(session, autocast)
    assert block == pytest.approx(WAVES * 8 * 0.0239)
    assert autocast.cost_s(session.evidence, 2.0, MIN_ROUNDS, step_s=0.055) < 3.0
    note = _budget_note(autocast, 10.0, comparison(autocast, session), None)
    assert note is not None
    assert note.startswith("not reached: 10 s of the budget left for it")
    assert (
        _budget_note(autocast, 2 * MIN_ROUNDS * block + 1.0, comparison(autocast, session), None)
        is None
    )
    # With nothing kept, the step's own time is what a trial costs: it fits in 10 s.
    alone = SimpleNamespace(kept=Kept(), evidence=SimpleNamespace(step_s=0.122))
    assert _budget_note(autocast, 10.0, comparison(autocast, alone), None) is None


def test_a_compile_is_started_only_where_its_comparison_fits_after_it() -> None:
    # The H200's ResNet-50 (2026-12-05): on top of the kept loader a compile's rounds are as
    # long as any fix's there (2 x 12 blocks of 0.77 s: 18 s); counting the compile alone let it
    # start where its rounds could not follow, and that run took 5m 29s of its 5 minutes.
    loader = Loader(worker_count(budget=CpuBudget(affinity=16, quota=None)))
    loader.alone = (LoaderAlone(0.05, 0.056, 19), LoaderAlone(0.305, 0.0239, 43))
    session = SimpleNamespace(
        kept=Kept((loader,), None, 0.055), evidence=SimpleNamespace(step_s=0.122)
    )
    compile_default = Compile()
    rounds = 2 * MIN_ROUNDS * block_s_for(session, compile_default)
    note = _budget_note(
        compile_default, MIN_COMPILE_S + 1.0, comparison(compile_default, session), None
    )
    assert note is not None
    assert note.startswith("not reached: 21 s of the budget left, under the 20 s a compile needs")
    assert f"and the {rounds:.0f} s its comparison needs" in note
    assert (
        _budget_note(
            compile_default,
            MIN_COMPILE_S + rounds + 1.0,
            comparison(compile_default, session),
            None,
        )
        is None
    )
    # A default compile measured at 41.5 s sizes the next mode's compile instead of the 20 s.
    overhead = Compile("reduce-overhead")
    slow = _budget_note(overhead, MIN_COMPILE_S + rounds + 1.0, comparison(overhead, session), 41.5)
    assert slow is not None
    assert "under the 42 s the default compile took" in slow
    assert _budget_note(overhead, 41.5 + rounds + 1.0, comparison(overhead, session), 41.5) is None
    # What the run records of each trial before it starts, to set beside the stage's time: the
    # compile it expects (the 20 s floor, then the default's measured time; max-autotune's
    # unsized until the default is measured) and its comparison.
    assert _trial_estimate_s(
        compile_default, comparison(compile_default, session), None
    ) == pytest.approx(MIN_COMPILE_S + rounds)
    assert _trial_estimate_s(overhead, comparison(overhead, session), 41.5) == pytest.approx(
        41.5 + rounds
    )
    autotune = Compile("max-autotune-no-cudagraphs")
    assert _trial_estimate_s(autotune, comparison(autotune, session), None) is None
    assert _trial_estimate_s(autotune, comparison(autotune, session), 41.5) == pytest.approx(
        AUTOTUNE_FACTOR * 41.5 + rounds
    )
    assert _trial_estimate_s(
        Autocast("bf16", "cpu"), comparison(Autocast("bf16", "cpu"), session), 41.5
    ) == pytest.approx(rounds)


def test_under_a_kept_loader_over_a_short_epoch_a_block_is_whole_epochs_on_both_sides() -> None:
    # The H200's ResNet-50: 32 batches an epoch, 55 ms a step with the kept loader, its 8 workers
    # a batch every 23.9 ms: an epoch of steps is 1.76 s, so a block is one epoch, 32 calls, on
    # both sides, and each holds the one refill at the epoch's start.
    loader = Loader(worker_count(budget=CpuBudget(affinity=16, quota=None)))
    loader.alone = (LoaderAlone(0.05, 0.056, 19), LoaderAlone(0.305, 0.0239, 43))
    loader.new = range(32)  # the new loader's epoch: len() of it
    target = SimpleNamespace(epoch_mode=False)
    session = SimpleNamespace(kept=Kept((loader,), None, 0.055), target=target)
    assert loader.calls_under(session) == 32
    autocast = Autocast("bf16", "cpu")
    assert calls_for(session, autocast) == 32
    assert trial_block_s(session, autocast) == pytest.approx(32 * 0.055)  # the budget's block
    # Steps so short that one epoch is well under the blocks' four waves: whole epochs, as many
    # as come nearest them.
    quick = SimpleNamespace(kept=Kept((loader,), None, 0.001), target=target)
    loader.alone = (loader.alone[0], LoaderAlone(0.305, 0.004, 43))
    assert loader.calls_under(quick) == 32 * round(WAVES * 8 * 0.004 / (32 * 0.004))
    # A long epoch (100 batches of 55 ms: 5.5 s): a refill falls in few blocks; blocks of time.
    loader.alone = (loader.alone[0], LoaderAlone(0.305, 0.0239, 43))
    loader.new = range(100)
    assert loader.calls_under(session) is None
    assert calls_for(session, autocast) is None
    # No epoch length (an IterableDataset), or a step that iterates its loader itself: none.
    loader.new = iter(range(32))
    assert loader.calls_under(session) is None
    loader.new = range(32)
    epochs = SimpleNamespace(kept=session.kept, target=SimpleNamespace(epoch_mode=True))
    assert loader.calls_under(epochs) is None
    # A larger batch draws from a loader of its own, whose epoch is not the kept loader's: its
    # blocks stay its own (as many of its batches as the kept fixes' blocks hold of theirs).
    larger = LargerBatch()
    larger.size, larger.new_size = 64, 256
    assert calls_for(session, larger) is None
    assert calls_for(session, loader) is None  # the loader's own trial sizes its blocks itself
    # Nothing kept: no count.
    assert calls_for(SimpleNamespace(kept=Kept(), target=target), autocast) is None
