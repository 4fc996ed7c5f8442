"""The parts of ``%tune`` that need no shell: budget, selection, the loss check, the batch
source, the rebuilt optimizer and loader, the attention pattern, the plan's lines, the figure.

Real torch objects on the CPU throughout (a DataLoader, an optimizer, a profiler run).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from jupyter_gpu.host.cpus import CpuBudget, worker_count
from jupyter_gpu.magics.compile.dynamo_watch import DynamoWatch
from jupyter_gpu.magics.profile.analysis import Analysis
from jupyter_gpu.magics.profile.syncs import Syncs
from jupyter_gpu.magics.replay.reach import Named, reach
from jupyter_gpu.magics.tune import mfu
from jupyter_gpu.magics.tune.batch_size import MAX_FACTOR, LargerBatch, headroom_factor
from jupyter_gpu.magics.tune.batches import (
    BatchSource,
    loader_kwargs,
    rebuilt,
    shut_down,
    time_loader,
)
from jupyter_gpu.magics.tune.budget import Budget, parse_budget
from jupyter_gpu.magics.tune.compile import AUTOTUNE_FACTOR, Compile
from jupyter_gpu.magics.tune.evidence import Evidence, FirstSteps
from jupyter_gpu.magics.tune.loader import Loader
from jupyter_gpu.magics.tune.optimizer import FusedOptimizer, rebuild
from jupyter_gpu.magics.tune.plan import selection
from jupyter_gpu.magics.tune.precision import Autocast, Tf32
from jupyter_gpu.magics.tune.progress import Progress
from jupyter_gpu.magics.tune.report import (
    AFTER_PROFILE,
    METHOD,
    fixes_table,
    method_lines,
    over_budget_line,
    stack_line,
    waterfall,
)
from jupyter_gpu.magics.tune.results import FixResult, StackResult, StepProfile, TuneResult
from jupyter_gpu.magics.tune.suggest import attention_patterns, softmax_lines, suggestions
from jupyter_gpu.magics.tune.target import Target, loader_in
from jupyter_gpu.magics.tune.threads import Threads
from jupyter_gpu.magics.tune.trial import LOSS_RTOL, loss_check, per_sample
from jupyter_gpu.measure import Timing
from jupyter_gpu.measure.interval import Ratio


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5m", 300.0), ("90s", 90.0), ("1m30s", 90.0), ("0.5h", 1800.0), ("120", 120.0)],
)
def test_a_budget_reads_minutes_seconds_and_hours(text: str, seconds: float) -> None:
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["soon", "0s", "", "5x", "nan", "1e309", "-5m", "5m soon"])
def test_a_budget_that_is_not_a_time_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="--budget"):
        parse_budget(text)


def test_only_and_skip_take_families_and_single_fixes() -> None:
    assert selection("precision", None) == {"tf32", "autocast", "autocast_channels_last"}
    # 16-bit autocast with channels_last is in both families, and a word of its own.
    assert selection("conv", None) == {"channels_last", "cudnn", "autocast_channels_last"}
    assert selection("autocast-channels-last", None) == {"autocast_channels_last"}
    assert "autocast_channels_last" in selection(None, "autocast,channels_last")
    assert selection("loader,compile", "compile") == {"loader"}
    assert "compile" not in selection(None, "compile")
    assert selection(None, "tf32") >= {"autocast", "loader", "optimizer", "compile"}
    with pytest.raises(argparse.ArgumentTypeError, match="'fast' is not a fix"):
        selection("fast", None)


def _steps(loss: float | None, batch: Any = None) -> FirstSteps:
    return FirstSteps((loss, loss), 0.01, None, batch)


def test_the_loss_check_flags_a_loss_outside_its_tolerance_and_says_which() -> None:
    batch = torch.ones(2)
    delta, within, note = loss_check(_steps(2.0, batch), _steps(2.0 * (1 + LOSS_RTOL / 2), batch))
    assert within
    assert note == ""
    assert delta == pytest.approx(LOSS_RTOL)
    delta, within, note = loss_check(_steps(2.0, batch), _steps(2.5, batch))
    assert not within
    assert "2.5 against 2" in note
    assert "25.0% off" in note
    _, within, note = loss_check(_steps(2.0, batch), _steps(math.nan, batch))
    assert not within
    assert "nan" in note


def test_losses_from_different_first_batches_or_no_loss_are_not_compared() -> None:
    delta, within, note = loss_check(_steps(2.0, torch.ones(2)), _steps(9.0, torch.zeros(2)))
    assert (delta, within) == (None, True)
    assert "first batch differs" in note
    delta, _, note = loss_check(_steps(None), _steps(None))
    assert delta is None
    assert "returns no loss" in note


def _loader(**kwargs: Any) -> torch.utils.data.DataLoader[Any]:
    data = torch.utils.data.TensorDataset(torch.arange(10.0))
    return torch.utils.data.DataLoader(data, batch_size=4, **kwargs)


def test_the_batch_source_switches_loaders_restarts_and_wraps_epochs() -> None:
    first, second = _loader(), _loader(drop_last=True)
    source = BatchSource()
    source.use(first)
    assert next(source)[0].tolist() == [0, 1, 2, 3]
    source.use(first)  # the same loader: carries on
    assert next(source)[0].tolist() == [4, 5, 6, 7]
    assert next(source)[0].tolist() == [8, 9]
    assert next(source)[0].tolist() == [0, 1, 2, 3]  # the next epoch
    source.use(second)  # another loader: a fresh epoch of it
    assert next(source)[0].tolist() == [0, 1, 2, 3]
    peeked = source.peek()
    assert next(source) is peeked
    source.use_fixed("fixed")
    assert [next(source), next(source)] == ["fixed", "fixed"]
    source.restart()
    assert next(source)[0].tolist() == [0, 1, 2, 3]
    source.release()
    with pytest.raises(RuntimeError, match="before it was given a loader"):
        next(source)


def test_a_rebuilt_loader_keeps_the_data_sampler_and_batching() -> None:
    old = _loader(shuffle=True, drop_last=True, collate_fn=list)
    new = rebuilt(old, num_workers=1, persistent_workers=True, prefetch_factor=4)
    assert new.dataset is old.dataset
    assert new.sampler is old.sampler
    assert (new.batch_size, new.drop_last, new.collate_fn) == (4, True, list)
    assert (new.num_workers, new.persistent_workers, new.prefetch_factor) == (1, True, 4)
    batches = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(range(10)), 3, False)
    custom = torch.utils.data.DataLoader(old.dataset, batch_sampler=batches)
    assert loader_kwargs(custom)["batch_sampler"] is batches
    assert "batch_size" not in loader_kwargs(custom)
    plain = rebuilt(custom)
    assert plain.batch_sampler is batches
    assert plain.num_workers == 0


def test_a_rebuilt_optimizer_keeps_groups_and_moments_without_sharing_them() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.AdamW(
        [{"params": [model.weight], "lr": 0.1}, {"params": [model.bias], "lr": 0.01}]
    )
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    fused = rebuild(opt, "fused")
    assert [g["lr"] for g in fused.param_groups] == [0.1, 0.01]
    assert all(g["fused"] for g in fused.param_groups)
    assert fused.param_groups[0]["params"][0] is model.weight
    old, new = opt.state[model.weight], fused.state[model.weight]
    assert torch.equal(old["exp_avg"], new["exp_avg"])
    assert old["exp_avg"].data_ptr() != new["exp_avg"].data_ptr()
    assert FusedOptimizer.for_optimizer(opt).how == "fused"
    assert FusedOptimizer("fused").explain_skip(fused) == "AdamW is fused already"
    sgd = torch.optim.SGD(model.parameters(), lr=0.1, foreach=True)
    assert "foreach" in rebuild(sgd, "fused").param_groups[0]
    assert FusedOptimizer("fused").explain_skip(None).startswith("no --optimizer")


def test_the_loader_behind_an_iterator_is_found() -> None:
    loader = _loader()

    def endless(inner: Any) -> Any:
        while True:
            yield from inner

    generator = endless(loader)
    next(generator)
    assert loader_in(generator, torch.utils.data.DataLoader, {}) is loader
    iterator = iter(loader)
    assert loader_in(iterator, torch.utils.data.DataLoader, {"loader": loader}) is loader
    assert loader_in(iterator, torch.utils.data.DataLoader, {}) is None


def test_an_object_the_magic_supplies_is_not_a_problem_for_the_runs() -> None:
    source = BatchSource()
    code = compile("next(batches)", "<step>", "eval")
    namespace = {"batches": source}
    refused = reach([code], namespace, Named())
    assert [p.label.rsplit(".", 1)[-1] for p in refused.problems] == ["batches"]
    assert reach([code], namespace, Named(supplied=(source,))).problems == []


class HandAttention(torch.nn.Module):
    def __init__(self, fused: bool) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(8, 24)
        self.fused = fused

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(t).split(8, dim=-1)
        if self.fused:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)
        scores = q @ k.transpose(-2, -1) / math.sqrt(8)
        return torch.softmax(scores, dim=-1) @ v


@pytest.mark.parametrize(("fused", "found"), [(False, 1), (True, 0)])
def test_a_softmax_between_two_batched_matmuls_is_found_in_a_profile(
    fused: bool, found: int
) -> None:
    model = HandAttention(fused)
    x = torch.randn(2, 16, 8)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        model(x).sum().backward()
    assert attention_patterns(prof) == found  # SDPA's own math kernel on a CPU is not counted
    (line,) = softmax_lines(model)  # the source line, named when the pattern is found
    assert line.startswith("HandAttention.forward line ")
    assert "torch.softmax(scores" in line


def _evidence(**changes: Any) -> Evidence:
    ev = Evidence("cpu", Timing((0.01,) * 8, 1), FirstSteps((1.0, 0.9), 0.02))
    ev.cpus = CpuBudget(affinity=4, quota=2.0)
    for key, value in changes.items():
        setattr(ev, key, value)
    return ev


def test_the_plan_says_why_a_fix_is_not_tried() -> None:
    cpu = _evidence(threads=2)
    assert "tensor cores" in (Tf32().why_not(cpu) or "")
    assert Threads(2).why_not(cpu) == (
        "torch uses 2 threads already, the 2 CPUs (cgroup quota 2 of 4 cores) this kernel may use"
    )
    assert Threads(2).why_not(_evidence(threads=4)) is None
    on = _evidence(autocast_on=True, autocast_dtype="bf16")
    assert Autocast("bf16", "cpu").why_not(on) == "autocast is on already (bf16)"
    cuda = _evidence(device="cuda", gpu_name="NVIDIA H200")
    assert "not launch-bound" in (Compile("reduce-overhead").why_not(cuda) or "")
    assert "needs a GPU" in (Compile("reduce-overhead").why_not(cpu) or "")


def test_max_autotune_waits_for_a_budget_that_holds_it() -> None:
    autotune = Compile("max-autotune-no-cudagraphs")
    assert "under the 20 s" in (autotune.budget_note(5.0, 1.0) or "")
    assert "was not measured" in (autotune.budget_note(100.0, None) or "")
    assert f"{AUTOTUNE_FACTOR}x the default" in (autotune.budget_note(100.0, 30.0) or "")
    assert autotune.budget_note(AUTOTUNE_FACTOR * 30.0 + 1, 30.0) is None


def test_the_waterfall_goes_in_the_order_kept_and_ends_on_the_stack_as_measured() -> None:
    ratio = Ratio(2.0, 1.9, 2.1, 12, 0.96)
    # Ranked by speedup, autocast first; kept in the order tried, the input pipeline first (the
    # autocast's gain was timed on top of it): the bars follow the order kept.
    fixes = [
        FixResult("bf16 autocast", "precision", 1.7, (1.6, 1.8), None, 0.0, True, "", "kept"),
        FixResult("input pipeline", "loader", 1.6, (1.5, 1.7), None, None, True, "", "kept"),
    ]
    fixes[0] = replace(fixes[0], on_top_of=("input pipeline",))
    result = TuneResult("step()", "cpu", fixes=fixes)
    result.stack = StackResult(("input pipeline", "bf16 autocast"), ratio, 1.6 * 1.7)
    result.profile = StepProfile(
        0.1, (0.09, 0.11), 12, 5, None, "", 0.5, 0, 0.0, {}, [], None, None, None, ""
    )
    drawn = waterfall(result)
    assert drawn is not None
    figure, svg = drawn
    trace = figure["data"][0]
    assert trace["x"] == ["as it is", "input pipeline", "bf16 autocast", "together (measured)"]
    assert trace["measure"] == ["absolute", "relative", "relative", "absolute"]
    assert trace["y"][0] == pytest.approx(100.0)
    assert trace["y"][1] == pytest.approx(100.0 / 1.6 - 100.0)
    assert trace["y"][2] == pytest.approx(100.0 / 1.6 / 1.7 - 100.0 / 1.6)
    assert trace["y"][-1] == pytest.approx(50.0)  # measured, not the product's 36.8 ms
    assert trace["decreasing"]["marker"]["color"] == "#2ca02c"  # a shorter step: green
    assert svg.startswith("<svg")


def test_the_report_gives_the_level_its_rounds_reached_not_the_one_asked() -> None:
    # 95 % is asked; 12 stretches of rounds reach 96 %, and five rounds reach only 94 %.
    profile = StepProfile(
        0.1,
        (0.09, 0.11),
        5,
        5,
        None,
        "",
        0.0,
        0,
        0.0,
        {},
        [],
        None,
        None,
        None,
        "",
        step_interval_level=0.9375,
    )
    assert profile.describe() == "100 ms a step (90.0 ms-110 ms, 94 % interval, 5 rounds)"
    ratio = Ratio(1.7, 1.6, 1.8, 12, 0.961)
    fix = FixResult("bf16 autocast", "precision", 1.7, (1.6, 1.8), None, 0.0, True, "", "kept")
    result = TuneResult("step()", "cpu", fixes=[replace(fix, ratio=ratio)])
    table = fixes_table(result)
    assert table.headers[3] == "96 % interval"
    assert table.rows[0][2].text == "1.70x"
    assert table.rows[0][3].text == "1.60-1.80x"


def test_a_loader_with_workers_starts_each_turn_with_its_first_batch_drawn() -> None:
    source = BatchSource()
    plain, pooled = _loader(), _loader(num_workers=1, persistent_workers=True)
    source.use(plain)
    assert source._it._num_yielded == 0  # no workers: nothing to fill, nothing drawn ahead
    source.use(pooled)
    assert source._it._num_yielded == 1  # drawn before the timed block, handed out next
    assert next(source)[0].tolist() == [0, 1, 2, 3]
    assert next(source)[0].tolist() == [4, 5, 6, 7]
    source.release()
    pooled._iterator = None


def test_a_per_call_ratio_becomes_a_per_sample_one() -> None:
    ratio = Ratio(0.6, 0.55, 0.65, 12, 0.96, variant="batch 32")
    scaled = per_sample(ratio, 2.0)
    assert (scaled.value, scaled.low, scaled.high) == pytest.approx((1.2, 1.1, 1.3))
    assert (scaled.rounds, scaled.variant) == (12, "batch 32")
    assert scaled.faster
    assert not ratio.faster


def _target(**changes: Any) -> Any:
    model = torch.nn.Linear(2, 2)
    code = compile("step()", "<step>", "eval")
    target = Target("step()", code, "model", model, None, None, **changes)
    return SimpleNamespace(target=target)


def test_a_larger_batch_is_sized_from_the_free_memory_or_doubled_on_a_cpu() -> None:
    gib = 2**30
    session = _target(batch_name="batch", batch_size=16)
    fix = LargerBatch()
    assert fix.explain_skip(session, _evidence()) is None  # a CPU: twice the batch
    assert (fix.size, fix.new_size, fix.name) == (16, 32, "batch 32 (from 16), per sample")
    cuda = _evidence(device="cuda", free_bytes=2 * gib)
    cuda.first = FirstSteps((1.0, 0.9), 0.02, 1 * gib)
    assert headroom_factor(cuda) == pytest.approx(1 + 0.9 * 2)
    assert fix.explain_skip(session, cuda) is None
    assert fix.new_size == int(16 * 2.8)
    roomy = _evidence(device="cuda", free_bytes=100 * gib)
    roomy.first = cuda.first
    assert fix.explain_skip(session, roomy) is None
    assert fix.new_size == MAX_FACTOR * 16  # at most 4x in one try
    full = _evidence(device="cuda", free_bytes=gib // 10)
    full.first = cuda.first
    assert "holds a batch of 17 at most" in (fix.explain_skip(session, full) or "")
    assert "no --batch NAME" in (LargerBatch().explain_skip(_target(), _evidence()) or "")


def test_the_suggestions_name_the_syncs_lines_and_the_batch_memory_allows() -> None:
    gib = 2**30
    syncs = Syncs(blocked_s=0.03, steps=3)
    syncs.by_call.update({"cudaStreamSynchronize": 3})
    syncs.places.update({"cell [4] line 9 in train_step": 3})
    analysis = Analysis(window_s=0.3, syncs=syncs, gpu_busy_s=0.2)
    ev = _evidence(device="cuda", analysis=analysis, free_bytes=8 * gib)
    ev.first = FirstSteps((1.0, 0.9), 0.02, 2 * gib)
    found = {s.name: s for s in suggestions(ev, torch.nn.Linear(2, 2), None, {})}
    sync = found["no host syncs"]
    assert sync.share == pytest.approx(0.1)
    assert sync.where == "cell [4] line 9 in train_step (x3)"
    assert "10.0%" in sync.text or "10%" in sync.text
    batch = found["a larger batch"]
    assert "about 4.6x as large would fit" in batch.text
    assert "pass --batch NAME" in batch.text
    # Tried (--batch): the suggestion quotes the measured figure instead.
    ratio = per_sample(Ratio(0.7, 0.65, 0.75, 12, 0.96), 2.0)
    tried = FixResult(
        "batch 32 (from 16), per sample", "batch", 1.4, (1.3, 1.5), gib, None, False, "", "", ratio
    )
    (batch,) = [s for s in suggestions(ev, None, "bs", {}, tried) if s.name == "a larger batch"]
    assert "tried (batch 32 (from 16), per sample): 1.40x faster" in batch.text
    assert "Raise bs" in batch.text
    assert batch.where == "bs"


def test_the_progress_bar_names_the_stage_and_its_rounds() -> None:
    pytest.importorskip("ipywidgets")
    kernel_shell = SimpleNamespace(kernel=object())  # a front end to draw in
    progress = Progress(kernel_shell, Budget(60.0), quiet=False)
    assert progress.bar.shown
    progress.stage("measuring the step as it is")
    assert "%tune 1: measuring the step as it is" in progress.bar.text.value  # no total yet
    progress.step()
    progress.plan(5)
    progress.stage("trying input pipeline")
    progress.on_round(4, 100)
    assert progress.bar.bar.max == 5
    assert progress.bar.bar.value == 1
    assert "%tune 2/5: trying input pipeline, round 4" in progress.bar.text.value
    assert "of the budget left" in progress.bar.text.value
    assert progress.lines == []  # a bar, not lines
    progress.close()
    assert not progress.bar.shown
    quiet = Progress(kernel_shell, Budget(60.0), quiet=True)
    assert not quiet.bar.shown


def test_the_terminal_progress_never_states_a_total_the_next_line_contradicts() -> None:
    terminal = Progress(SimpleNamespace(), Budget(60.0), quiet=False)  # no kernel: no bar
    assert not terminal.bar.shown
    terminal.stage("measuring the step as it is")
    terminal.step()
    terminal.plan(4)  # two fixes to try, and the two together
    for name in ("autocast", "compile"):
        terminal.stage(f"trying {name}")
        terminal.step()
    terminal.plan(terminal.done)  # only one was kept: no stack to time
    assert terminal.lines == [
        "%tune [1] measuring the step as it is",
        "%tune [2/4] trying autocast",
        "%tune [3/4] trying compile",
    ]
    assert terminal.total == terminal.done == 3


class _ClockBudget(Budget):
    """A budget whose clock the test moves."""

    now = 0.0

    def elapsed_s(self) -> float:
        return self.now


def test_each_stage_s_time_is_kept_and_an_overrun_names_the_longest() -> None:
    budget = _ClockBudget(300.0)
    progress = Progress(SimpleNamespace(), budget, quiet=False)  # no kernel: lines
    progress.stage("measuring the step as it is")
    budget.now = 40.0
    progress.step()
    progress.plan(4)
    budget.now = 41.0
    progress.stage("trying torch.compile")
    budget.now = 250.0
    progress.step()
    progress.stage("trying bf16 autocast")
    budget.now = 300.0
    progress.step()
    progress.skip("cudnn.benchmark", "not reached: 0 s of the budget left")  # not timed
    budget.now = 329.0
    progress.close()
    assert progress.lines[-1] == "%tune [4/4] cudnn.benchmark: not reached: 0 s of the budget left"
    assert progress.done == progress.total == 4
    assert progress.times == [
        ("measuring the step as it is", 40.0),
        ("trying torch.compile", 209.0),
        ("trying bf16 autocast", 50.0),
    ]
    result = TuneResult("step()", "cuda", budget_s=300.0, elapsed_s=329.0, stages=progress.times)
    line = over_budget_line(result)
    assert line is not None
    assert line.startswith("Over the budget by 29 s")
    longest = "the longest stages: trying torch.compile 3m 29s, trying bf16 autocast 50 s, meas"
    assert longest in line
    # Beside what the budget expected of each fix's stage, where it recorded an estimate.
    told = replace(result, estimates={"trying torch.compile": 53.0})
    line = over_budget_line(told)
    assert line is not None
    assert "trying torch.compile 3m 29s (estimated 53 s), trying bf16 autocast 50 s," in line
    assert "putting things back) 30 s" in line  # 329 s less the 299 s in stages
    assert over_budget_line(replace(result, elapsed_s=299.0)) is None  # within: nothing to say


def test_a_graph_break_in_the_compile_report_becomes_the_causes_tables_advice() -> None:
    def clamped(t: torch.Tensor) -> torch.Tensor:
        h = torch.relu(t)
        h = h / max(1.0, h.abs().max().item())  # a Python number from a tensor: a graph break
        return h.sin()

    compiled = torch.compile(clamped, backend="eager")  # dynamo's own tracing, no codegen
    watch = DynamoWatch()
    watch.start()
    try:
        compiled(torch.randn(4))
    finally:
        report = watch.stop({})
    assert report is not None
    found = suggestions(_evidence(), None, None, {"default": report})
    (advice,) = [s for s in found if s.name.startswith("torch.compile (default)")]
    assert "1 graph break(s)" in advice.text
    assert "max(1.0, h.abs().max().item())" in advice.text
    assert "--fullgraph" in advice.text
    assert advice.where == "the compile report"


def test_mfu_divides_by_the_data_sheet_peak_of_the_dtype_the_matmuls_run_in() -> None:
    h200 = mfu.mfu(4e14, "NVIDIA H200", "bf16")
    assert mfu.percent(h200) == f"{4e14 / (h200.peak.dense_tflops * 1e12):.0%}"
    assert "data-sheet dense bf16 peak" in mfu.describe(h200, "counted")
    assert "on a CPU" in mfu.mfu(1e9, "", "fp32")
    assert mfu.percent(mfu.mfu(1e9, "", "fp32")) == "n/a"
    assert "not in the data-sheet table" in mfu.describe(mfu.mfu(1e12, "A GPU", "fp32"), "x")


def test_the_mfu_before_and_after_names_the_peak_each_figure_divides_by() -> None:
    # The H200 target of round 4: fp32 step, bf16 autocast kept, 2.5 times faster. Each MFU
    # divides by its own dtype's peak, so "29% -> 5%" read as a drop; the line names both peaks
    # and gives the model TFLOP/s on one scale.
    before = mfu.mfu(0.29 * 67e12, "NVIDIA H200", "fp32")
    after = mfu.mfu(2.5 * 0.29 * 67e12, "NVIDIA H200", "bf16")
    profile = StepProfile(
        0.1,
        (0.09, 0.11),
        12,
        5,
        0.1,
        "",
        0.0,
        0,
        0.0,
        {},
        [],
        None,
        None,
        1.9e12,
        "counted",
        mfu_before=before,
        mfu_after=after,
    )
    stack = StackResult(("bf16 autocast",), Ratio(2.5, 2.4, 2.6, 12, 0.96), 2.5)
    line = stack_line(stack, profile)
    assert "MFU 29% of the fp32 dense peak (67 TFLOP/s) -> 5% of the bf16 dense peak (989.5" in line
    assert "model 19.4 -> 48.6 TFLOP/s" in line
    # The same dtype before and after: one peak, said once.
    faster = mfu.mfu(1.6 * 0.29 * 67e12, "NVIDIA H200", "fp32")
    same = stack_line(stack, replace(profile, mfu_after=faster))
    assert "MFU 29% -> 46% of the fp32 dense peak (67 TFLOP/s) (model 19.4 -> 31.1 TFLOP/s)" in same
    # No MFU on a CPU: no MFU in the line.
    cpu = replace(profile, mfu_before=mfu.mfu(1e9, "", "fp32"), mfu_after=mfu.mfu(2e9, "", "fp32"))
    assert "MFU" not in stack_line(stack, cpu)


def _slow_start(worker_id: int) -> None:
    time.sleep(0.4)  # workers that take a while to start, as a CUDA process's do


def test_the_loader_alone_is_timed_over_a_steady_count_of_batches() -> None:
    # On the H200 the loader alone was timed over 4 batches after a slow first one: the other
    # workers' first batches, made meanwhile, came at once. Now the first wave is drawn untimed
    # and at least 16 batches, and four waves, are counted.
    data = torch.utils.data.TensorDataset(torch.arange(4096.0))
    pooled = torch.utils.data.DataLoader(
        data, batch_size=4, num_workers=2, worker_init_fn=_slow_start
    )
    alone = time_loader(pooled)
    # The workers' 0.4 s start is in the first batch (most of it: they start when the iterator
    # is made, a moment before its clock; the clean-clone CI read 0.383 s), not in the rest.
    assert alone.first_s >= 0.2
    assert alone.per_batch_s < alone.first_s / 20
    assert alone.batches >= max(16, 4 * 2)
    assert alone.short == ""
    assert "short" not in alone.describe()

    # An epoch of fewer batches than the steady count (3 here; the H200's 32 a ResNet-50 epoch
    # against 8 workers' 32): a loader without workers goes on into its next epochs.
    tiny = time_loader(_loader())
    assert tiny.short == ""
    assert tiny.batches >= 16
    assert tiny.epochs >= 6  # 3 batches an epoch
    assert f"over {tiny.batches} batches in {tiny.epochs} epochs (the epoch boundary" in (
        tiny.describe()
    )
    assert "short" not in tiny.describe()


def test_the_loader_alone_goes_on_into_the_next_epoch_where_its_workers_persist() -> None:
    # 24 batches an epoch, 2 workers: the steady count is 16 after the first wave of 2.
    data = torch.utils.data.TensorDataset(torch.arange(96.0))
    kept = torch.utils.data.DataLoader(data, batch_size=4, num_workers=2, persistent_workers=True)
    try:
        alone = time_loader(kept, least_s=0.0)
        assert alone.short == ""
        assert alone.batches == 16  # 22 left in the first epoch: the count ends within it
        assert alone.epochs == 1
        assert " epochs" not in alone.describe()
        small = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(torch.arange(24.0)),
            batch_size=4,
            num_workers=2,
            persistent_workers=True,
        )
        over = time_loader(small, least_s=0.0)  # 6 batches an epoch: the same workers go on
        assert over.short == ""
        assert over.batches == 16
        assert over.epochs == 3  # 4 after the first wave of 2, then 6 and 6
        assert "in 3 epochs (the epoch boundary's refill counted" in over.describe()
        assert small._iterator is not None  # its workers are still the loader's own
        # Workers that are not persistent: a next epoch would start new ones, so it is short.
        fresh = time_loader(
            torch.utils.data.DataLoader(small.dataset, batch_size=4, num_workers=2), least_s=0.0
        )
        assert "the epoch ended after 4 of the 16 batches" in fresh.short
        assert "not persistent" in fresh.short
        assert "not a steady figure" in fresh.describe()
    finally:
        shut_down(kept)
        shut_down(small)


def test_the_new_loaders_code_says_whether_the_quota_or_the_cap_set_its_workers() -> None:
    def code_line(cpus: int) -> str:
        fix = Loader(worker_count(budget=CpuBudget(affinity=cpus, quota=None)))
        target = SimpleNamespace(
            loader=_loader(), loader_name="loader", cuda=True, batches_name=None
        )
        return str(fix.code(SimpleNamespace(target=target, user_ns={}))[0])

    capped = code_line(16)  # the H200's 16 CPUs: 8 workers, the cap
    assert "num_workers=8" in capped
    assert "# workers: 8, the cap (the 16 CPUs this kernel may use, less one" in capped
    assert "would allow 15)" in capped
    quota = code_line(4)
    assert "num_workers=3" in quota
    assert (
        "# workers: 3 = the 4 CPUs this kernel may use, less one for the training process" in quota
    )


def test_on_a_gpu_the_method_says_the_fixes_were_timed_after_a_profile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    profile = StepProfile(
        0.1, (0.09, 0.11), 12, 5, None, "", 0.0, 0, 0.0, {}, [], None, None, None, ""
    )
    monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)
    on_gpu = TuneResult("step()", "cuda", profile=profile)
    assert method_lines(on_gpu) == [METHOD, AFTER_PROFILE]
    # No profile, a CPU (no CUPTI), or CUPTI torn down after the profile: nothing to say.
    assert method_lines(TuneResult("step()", "cuda")) == [METHOD]
    assert method_lines(TuneResult("step()", "cpu", profile=profile)) == [METHOD]
    monkeypatch.setenv("TEARDOWN_CUPTI", "1")
    assert method_lines(on_gpu) == [METHOD]
