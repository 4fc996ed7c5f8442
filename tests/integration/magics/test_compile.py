"""%compile in a real IPython shell (dynamo with the eager backend: fast, no C++ compiler)."""

from __future__ import annotations

import pytest
import torch

from .conftest import MODEL_CELL, Shell, training_bits


def test_compile_rebinds_and_reports_after_the_first_call(shell: Shell) -> None:
    shell.ok(MODEL_CELL)
    eager = shell["model"]
    ran = shell.ok("r = %compile model --backend eager -o")
    assert "compiles at its first call" in ran.text
    compiled = shell["model"]
    assert compiled is not eager
    assert compiled._orig_mod is eager
    assert shell["r"].eager is eager
    assert shell["r"].compiled is compiled
    first = shell.ok("out = model(x)")
    assert "torch.compile in this cell: 1 graph(s)" in first.text
    assert "graph breaks: none" in first.text
    assert len(shell["r"].reports) == 1
    assert shell["r"].reports[0].graphs == 1
    quiet = shell.ok("out = model(x)")  # cached: nothing compiles, nothing is reported
    assert "torch.compile" not in quiet.text


def test_graph_break_reason_and_user_line(shell: Shell) -> None:
    shell.ok(
        "def step(t):\n    t = t * 2\n    print('logging in the middle')\n    return t.sin()\n"
    )
    defining_cell = shell.ip.execution_count - 1
    shell.ok("%compile step --backend eager")
    ran = shell.ok("step(torch.ones(3))")
    assert "graph breaks: 1" in ran.text
    assert f"cell [{defining_cell}] line 3" in ran.text
    assert "print('logging in the middle')" in ran.text
    assert "print" in ran.text.split("graph breaks: 1", 1)[1]
    html = "".join(ran.bundles("text/html"))
    assert "<table" in html
    assert "logging in the middle" in html


def test_recompile_is_reported_with_its_reason(shell: Shell) -> None:
    shell.ok("def double(t):\n    return t * 2\n")
    shell.ok("%compile double --backend eager")
    shell.ok("double(torch.ones(3))")
    ran = shell.ok("double(torch.ones(4, 4))")
    assert "recompiles: 1" in ran.text
    assert "double" in ran.text


def test_bench_times_eager_and_compiled(shell: Shell) -> None:
    shell.ok(MODEL_CELL)
    ran = shell.ok('r = %compile model --backend eager --bench "model(x)" -o')
    bench = shell["r"].bench
    assert bench is not None
    # Interleaved rounds: one per-call time per round on each side, paired into the ratio.
    assert bench.eager.runs == bench.compiled.runs == bench.ratio.rounds >= 8
    assert bench.eager_s > 0
    assert bench.compiled_s > 0
    assert bench.ratio.low <= bench.speedup <= bench.ratio.high
    assert "bench model(x): eager" in ran.text
    assert f"{bench.ratio.rounds} rounds" in ran.text
    assert "interval" in ran.text
    assert "at the first call of model(x)" in ran.text
    assert shell["r"].reports
    assert shell["r"].reports[0].graphs >= 1
    assert shell["model"] is shell["r"].compiled
    # The per-cell reporter must not report the same compile twice.
    assert ran.text.count("torch.compile ") == 1


def test_undo_and_recompiling_a_compiled_name(shell: Shell) -> None:
    shell.ok(MODEL_CELL)
    eager = shell["model"]
    shell.ok("%compile model --backend eager")
    shell.ok("%compile model --backend aot_eager")  # compiles the eager original again
    assert shell["model"]._orig_mod is eager
    ran = shell.ok("%compile model --undo")
    assert shell["model"] is eager
    assert "eager Net again" in ran.text
    assert "nothing to undo" in shell.usage_error("%compile model --undo")


def test_bad_input_leaves_the_name_alone(shell: Shell) -> None:
    shell.ok(MODEL_CELL)
    eager = shell["model"]
    shell.ok("class Net(torch.nn.Module):\n    pass")
    shell.refuses(
        {
            "%compile modle": "no variable named modle",
            "%compile x": "not a torch.nn.Module or a function",
            "%compile Net": "is a class",
            "%compile model --mode fastest": "unknown",
            "%compile model --backend eager --mode max-autotune": "inductor backend only",
            "%compile model --backend nope": "not a registered backend",
            '%compile model --bench "model(x"': "not a Python expression",
            "%compile model --bench model(x) extra": "quotes",
            "%compile model.layer": "compile it in place with model.layer = torch.compile(",
        }
    )
    assert shell["model"] is eager


def test_bench_failure_restores_the_eager_model(shell: Shell) -> None:
    shell.ok(MODEL_CELL)
    eager = shell["model"]
    ran = shell.run('%compile model --backend eager --bench "model(torch.ones(2, 3))"')
    assert isinstance(ran.error, RuntimeError)  # the user's own error: shapes do not match
    assert shell["model"] is eager


def test_fullgraph_graph_break_fails_and_restores(shell: Shell) -> None:
    shell.ok("def chatty(t):\n    print('hi')\n    return t + 1\n")
    original = shell["chatty"]
    ran = shell.run('%compile chatty --backend eager --fullgraph --bench "chatty(torch.ones(2))"')
    assert ran.error is not None
    assert "UsageError" not in type(ran.error).__name__
    assert shell["chatty"] is original


def test_other_compiled_functions_keep_their_compiled_code(shell: Shell) -> None:
    # torch._dynamo.explain would reset dynamo; %compile must not.
    shell.ok("def first(t):\n    return t.cos() + 1\n")
    shell.ok("%compile first --backend eager")
    shell.ok("first(torch.ones(3))")
    shell.ok(MODEL_CELL)
    shell.ok('%compile model --backend eager --bench "model(x)"')
    again = shell.ok("first(torch.ones(3))")
    assert "torch.compile" not in again.text  # still compiled: no new compile in this cell


def test_custom_backend_function_from_the_notebook(shell: Shell) -> None:
    shell.ok(
        "calls = []\n"
        "def my_backend(gm, example_inputs):\n"
        "    calls.append(len(gm.graph.nodes))\n"
        "    return gm.forward\n"
        "def f(t):\n"
        "    return t.relu() * 3\n"
    )
    shell.ok("%compile f --backend my_backend")
    shell.ok("f(torch.ones(2))")
    assert shell["calls"]


def test_unload_removes_the_reporter(shell: Shell) -> None:
    shell.ok("def g(t):\n    return t * 5\n")
    shell.ok("%compile g --backend eager")
    shell.ok("%unload_ext jupyter_gpu")
    ran = shell.ok("g(torch.ones(2))")
    assert "torch.compile" not in ran.text
    assert torch.equal(ran.result.result, torch.full((2,), 5.0))


def test_each_result_gets_its_own_reports_and_its_own_quiet(shell: Shell) -> None:
    shell.ok(MODEL_CELL)
    shell.ok("def f(t):\n    return t.relu() * 3\n")
    shell.ok("rm = %compile model --backend eager -q -o")
    shell.ok("rf = %compile f --backend eager -o")
    quiet = shell.ok("out = model(x)")
    assert "torch.compile" not in quiet.text  # model's -q quiets model's reports only
    loud = shell.ok("f(torch.ones(3))")
    assert "torch.compile in this cell" in loud.text
    rm, rf = shell["rm"], shell["rf"]
    assert len(rm.reports) == 1
    assert len(rf.reports) == 1
    assert rm.reports[0] is not rf.reports[0]
    shell.ok("f(torch.ones(3)); out = model(x)")  # cached: nothing new for either
    assert len(rm.reports) == 1
    assert len(rf.reports) == 1


def test_bench_says_why_compiled_is_no_faster(shell: Shell) -> None:
    shell.ok(MODEL_CELL)
    ran = shell.ok('r = %compile model --backend eager --bench "model(x)" -o')
    r = shell["r"]
    # A Why is owed unless compiled is measurably faster by 10 % or more (the magic's rule: the
    # interval above 1 and the figure at 1.1 or more); the eager backend fuses nothing: usually so.
    if not (r.bench.ratio.faster and r.bench.speedup >= 1.1):
        assert "Why: " in ran.text
        assert r.explanations
        assert "torch recorded no cause" not in ran.text  # the old, evidence-free line
    else:
        assert "Why: " not in ran.text


def test_bench_of_a_training_step_leaves_the_weights_and_adamw_as_they_were(shell: Shell) -> None:
    # The README's own example: before, --bench ran the step ~1000 times and trained the model.
    shell.mid_training(MODEL_CELL)  # AdamW's moments and the gradients exist
    before = training_bits(shell)
    ran = shell.ok('r = %compile model --backend eager --bench "train_step()" --optimizer opt -o')
    r = shell["r"]
    assert r.bench.restored is not None
    # Every call the bench made was undone: the timed ones, their warm-ups and the compiling
    # call (how many fit in the timing budget depends on the machine's load).
    eager, compiled = r.bench.eager, r.bench.compiled
    assert r.bench.restored.runs >= eager.warmup + eager.runs + 1 + compiled.warmup + compiled.runs
    assert r.bench.restored.exact
    assert training_bits(shell) == before  # bit for bit, the param groups too
    assert f"Restored after {r.bench.restored.runs:,} runs, checked bit for bit: model, opt" in (
        ran.text
    )


def test_bench_refuses_before_running_what_it_cannot_put_back(shell: Shell) -> None:
    shell.ok(MODEL_CELL)
    eager = shell["model"]
    before = training_bits(shell)
    message = shell.usage_error('%compile model --backend eager --bench "train_step()"')
    assert "opt: the AdamW over model's parameters" in message
    assert "--optimizer opt" in message
    assert "--allow-side-effects" in message
    assert shell["model"] is eager  # nothing compiled, nothing ran
    assert training_bits(shell) == before
    shell.ok(
        "def save_step():\n    loss = train_step()\n    torch.save(model.state_dict(), 'm.pt')"
    )
    message = shell.usage_error(
        '%compile model --backend eager --bench "save_step()" --optimizer opt'
    )
    assert "calls .save()" in message
    assert "write a file" in message
    assert "--optimizer goes with --bench" in shell.usage_error(
        "%compile model --optimizer opt"
    ).replace("and --allow-side-effects go", "goes")
    assert "not a torch.optim.Optimizer" in shell.usage_error(
        '%compile model --backend eager --bench "model(x)" --optimizer x'
    )
    ran = shell.ok('%compile model --backend eager --bench "train_step()" --allow-side-effects')
    assert "Not put back (--allow-side-effects): opt" in ran.text


def test_bench_puts_back_the_tensors_and_names_the_expression_changes(shell: Shell) -> None:
    shell.ok(
        "acc = torch.zeros(4)\n"
        "calls = 0\n"
        "def step(t):\n"
        "    global calls\n"
        "    calls += 1\n"
        "    acc.add_(t)  # an in-place update of a global tensor\n"
        "    return t * 2\n"
        "inp = torch.ones(4)"
    )
    ran = shell.ok('%compile step --backend eager --bench "step(inp)"')
    assert torch.equal(shell["acc"], torch.zeros(4))
    assert shell["calls"] == 0  # the rebinding of a global is put back too
    assert "checked bit for bit" in ran.text


def test_tiny_function_is_not_blamed_on_matmuls_or_tf32(shell: Shell) -> None:
    # a + 1 on 8 floats: the old line blamed "a few large kernels (matmuls)" on CPU. With the
    # eager backend the reason is that nothing was compiled (torch's eager backend runs the
    # captured graph op by op), not the matmuls or launches that compiling would change.
    shell.ok("def tiny(a):\n    return a + 1\nt = torch.randn(8)")
    ran = shell.ok('r = %compile tiny --backend eager --bench "tiny(t)" -o')
    r = shell["r"]
    if r.bench.speedup < 1.1:
        why = [line for line in ran.text.splitlines() if line.startswith("Why: ")]
        assert why
        assert not any("matmul" in line.lower() or "tf32" in line.lower() for line in why), why
        assert {e.kind for e in r.explanations} == {"no_compiler"}
        assert why[0].startswith("Why: The eager backend compiles nothing: ")
        assert "µs" in why[0]  # it quotes the figures it measured


def test_bench_shows_the_expression_warning_once_and_not_its_own(
    shell: Shell, capfd: pytest.CaptureFixture[str]
) -> None:
    shell.ok(
        "import warnings\n"
        "def noisy(a):\n"
        "    warnings.warn('noisy: deprecated argument', UserWarning)\n"
        "    return a + 1\n"
        "t = torch.randn(8)"
    )
    ran = shell.ok('%compile noisy --backend eager --bench "noisy(t)"')
    notes = [line for line in ran.text.splitlines() if line.startswith("Note: ")]
    # said once, with how many times, in the magic's words (the report's graph-break table
    # quotes the line too: the warning breaks the graph)
    assert len([n for n in notes if "noisy: deprecated argument" in n]) == 1, notes
    assert "warned (" in notes[0]
    out, err = capfd.readouterr()
    for text in (ran.text, out, err):
        assert "Profiler clears events" not in text  # the magic's own profiler, never shown
        assert "started again" not in text
        assert "USDT" not in text
        assert "UserWarning: noisy" not in text  # not a raw warning


def test_three_repeats_of_one_bench_each_carry_their_interval(shell: Shell) -> None:
    """The same bench, three times: each ratio with its interval, its rounds and its method.

    A block of eager runs then a block of compiled runs said 1.13x, 1.28x and 1.30x slower on
    one CPU MLP (and 43x under load), with no interval. Whether repeats agree is the machine's
    as much as the method's: on a quiet 2-core VM this very bench moved between 0.23 and 0.56
    from one repeat to the next while a call timed against itself held 1.0
    (benchmarks/bench_repeats.py prints both; CI once failed an overlap assertion here). So the
    repeats' agreement is a benchmark's figure, the calibration a unit test
    (tests/unit/measure/test_compare.py), and this checks what each report must carry.
    """
    shell.ok(MODEL_CELL)
    for _ in range(3):
        ran = shell.ok('r = %compile model --backend eager --bench "model(x)" -o')
        bench = shell["r"].bench
        assert bench.machine.steady == ("Not steady:" not in ran.text)
        ratio = bench.ratio
        assert ratio.low <= ratio.value <= ratio.high
        assert ratio.low < ratio.high  # an interval, not a point
        assert ratio.rounds >= 8
        assert ratio.level >= 0.95
        assert ratio.describe() in ran.text, ran.text  # printed as the figure


# One large matmul a call: eager and the eager backend run the same kernel, and Dynamo's guard
# check (about 30 µs here) is a small share of it, so the true ratio hardly depends on the
# machine's state; what varies between repeats is noise, which the intervals must cover. The
# share must be small on a fast CPU too: a 384 x 384 matmul takes 1.7 ms on one core of the
# 2-core build machine but 1.1 ms on an H100 host's, where in the whole suite the eager backend
# came out 7-10 % slower and that share moved between repeats further than the intervals
# (0.90x, 0.92x, 0.93x, each +-0.7 %; 2026-12-07). So the size is the smallest whose matmul
# takes 1.5 ms: 384 on the build machine, 512 there (2.7 ms; the test then passed twice).
MATMUL_CELL = """
import time

def _matmul_s(n):
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    start = time.perf_counter()
    for _ in range(5):
        a @ b
    return (time.perf_counter() - start) / 5

size = next((n for n in (384, 512, 768, 1024) if _matmul_s(n) >= 1.5e-3), 1536)

class Projection(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(size, size))

    def forward(self, t):
        return t @ self.w

proj = Projection()
big = torch.randn(size, size)
"""


def test_three_repeats_of_one_bench_give_intervals_that_overlap(shell: Shell) -> None:
    """Three repeats of a bench whose two sides do the same work agree within their intervals.

    A block of eager runs then a block of compiled runs said 1.13x, 1.28x and 1.30x slower on
    one CPU MLP, with no interval. Here the two sides run one and the same matmul, so the ratio
    the machine allows is the same each time, and three interleaved benches on a steady machine
    must share a value; on a busy one, each report must say it was not steady.
    (Where the sides do different work, a shared VM's state moves the true ratio between
    repeats: see the test above and benchmarks/bench_repeats.py.)
    """
    shell.ok("torch.set_num_threads(1)")  # one core: the other cores' load stays out of it
    shell.ok(MATMUL_CELL)
    benches = []
    for _ in range(3):
        ran = shell.ok('r = %compile proj --backend eager --bench "proj(big)" -o')
        bench = shell["r"].bench
        assert bench.machine.steady == ("Not steady:" not in ran.text)
        benches.append(bench)
    # Other processes that keep the CPUs busy preempt the blocks at random (at a load of 10 on
    # 2 cores: 0.76-2.7x for this same matmul); the report then says so, and that is the check.
    if all(b.machine.steady for b in benches):
        ratios = [b.ratio for b in benches]
        assert max(r.low for r in ratios) <= min(r.high for r in ratios), [
            (r.low, r.value, r.high) for r in ratios
        ]
