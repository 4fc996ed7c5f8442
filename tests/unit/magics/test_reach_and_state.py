"""What repeated runs reach (read from the code) and how the saved state is put back, bit for bit.

Plain namespaces stand in for the notebook's (``reach`` reads any globals dict); the torch
objects are real. The magics' own tests (tests/integration/magics) run the same through a real
IPython shell.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch

from jupyter_gpu.magics.probes.peak import replay_peak
from jupyter_gpu.magics.replay.reach import Named
from jupyter_gpu.magics.replay.state import SavedState, bitwise_equal
from tests.unit.magics.cell_namespace import reached, run_source


def problems(ns: dict[str, Any], expr: str, named: Named | None = None) -> list[str]:
    return [p.sentence() for p in reached(ns, expr, named).problems]


MODEL = """
model = torch.nn.Linear(4, 2)
opt = torch.optim.AdamW(model.parameters(), lr=0.1)
x = torch.randn(3, 4)
def step():
    opt.zero_grad()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    return loss
"""


def test_an_optimizer_that_is_not_named_is_a_problem_with_its_fix() -> None:
    ns = run_source(MODEL)
    named = Named({"model": ns["model"]})
    found = problems(ns, "step()", named)
    assert found == [
        "opt: the AdamW over model's parameters, not named: each run would step it "
        "(pass --optimizer opt)"
    ]
    assert problems(ns, "step()", Named({"model": ns["model"]}, {"opt": ns["opt"]})) == []
    # The named optimizer's parameters are saved with it: a model whose tensors it all holds
    # needs no name of its own.
    assert problems(ns, "step()", Named(optimizers={"opt": ns["opt"]}, model_option="")) == []
    # One with a tensor nothing named holds does; a magic without the option (%compile's model
    # is NAME) gives no option to pass.
    weight_only = torch.optim.AdamW([ns["model"].weight])
    bare = Named(optimizers={"opt": weight_only}, model_option="")
    found = [p for p in problems(ns, "step()", bare) if p.startswith("model:")]
    assert found == [
        "model: a Linear with 1 parameter or buffer tensor(s) that is not the named model"
    ]


OWN_CLASS = """
class Trainer:
    def __init__(self, model):
        self.model = model
        self.n = 0
        self.seen = []
    def step(self, k):
        self.n += k
        self.seen.append(k)
        self.last = k
        return self.helper()
    def helper(self):
        self.n = self.n * 2
    def flag_model(self):
        self.model.flag = 1
    def nested(self):
        def bump(obj):
            obj.n = 1
        bump(self)
    def rebinds_self(self, other):
        self = other
        self.n = 1
trainer = Trainer(torch.nn.Linear(2, 2))
"""


@pytest.mark.parametrize(
    ("source", "expr", "phrase"),
    [
        ("def f():\n    return open('x.txt', 'w')", "f()", "calls open()"),
        ("def f():\n    torch.save({}, 'x.pt')", "f()", "calls .save() at cell [3] line 2 in f"),
        ("def f():\n    torch.set_flush_denormal(True)", "f()", "global setting"),
        ("def f():\n    torch.cuda.reset_peak_memory_stats()", "f()", "peak counters"),
        ("it = iter(range(9))\ndef f():\n    return next(it)", "f()", "it: a range_iterator"),
        (
            "class Box:\n    @property\n    def size(self):\n        return 1\n"
            "    def add(self):\n        pass\nbox = Box()",
            "box.add()",
            "box: a Box, which it cannot look into",
        ),
        (  # a library's object
            "import argparse\nparser = argparse.ArgumentParser()",
            "parser.parse_args([])",
            "parser: a ArgumentParser, which it cannot look into",
        ),
        (  # a store through self on another object
            OWN_CLASS,
            "trainer.flag_model()",
            "sets an attribute (.flag) at cell [3] line 15 in flag_model",
        ),
        (  # a store in nested code, which has no self of its own
            OWN_CLASS,
            "trainer.nested()",
            "sets an attribute (.n) at cell [3] line 18 in bump",
        ),
        (  # self rebound first: the store is not known to be on the trainer
            OWN_CLASS,
            "trainer.rebinds_self(1)",
            "sets an attribute (.n) at cell [3] line 22 in rebinds_self",
        ),
        ("def f():\n    f.calls = 1", "f()", "sets an attribute (.calls)"),
        ("def f():\n    return globals()", "f()", "uses globals()"),
        (
            "sched = torch.optim.lr_scheduler.StepLR(torch.optim.SGD([torch.zeros(1, "
            "requires_grad=True)], lr=1), 1)",
            "sched.step()",
            "sched: a StepLR over a SGD that is not named: each run changes that optimizer's "
            "param_groups (name it with --optimizer)",
        ),
    ],
)
def test_what_cannot_be_put_back_is_named(source: str, expr: str, phrase: str) -> None:
    ns = run_source(source)
    assert any(phrase in p for p in problems(ns, expr)), problems(ns, expr)


ROUTES = """
def make_step(net, optim):
    def closure_step():
        optim.zero_grad()
        net(x).sum().backward()
        optim.step()
    return closure_step
cstep = make_step(model, opt)
alias = model
def by_alias():
    return alias(x)
class Holder:
    pass
holder = Holder()
holder.net = model
"""


@pytest.mark.parametrize(
    ("expr", "routes"),
    [
        ("step()", {"model": ["model"], "opt": ["opt"]}),
        ("cstep()", {"model": ["closure_step's net"], "opt": ["closure_step's optim"]}),
        ("by_alias()", {"model": ["alias"]}),
        ("(holder, step())", {"model": ["holder.net", "model"], "opt": ["opt"]}),
        ("x.sum()", {}),
    ],
)
def test_the_ways_the_code_reaches_a_named_model_are_listed(
    expr: str, routes: dict[str, list[str]]
) -> None:
    # A magic that binds the name to another object (a compiled model) changes only a step
    # that loads the name.
    ns = run_source(MODEL + ROUTES)
    named = Named({"model": ns["model"]}, {"opt": ns["opt"]})
    found = reached(ns, expr, named)
    assert found.named_routes == routes
    loaded = {name for name, ways in routes.items() if name in ways}
    assert found.loaded_names & {"model", "opt"} == loaded


def test_harmless_and_restorable_objects_are_no_problem() -> None:
    ns = run_source(
        "import math, functools, random as rnd\n"
        "loss_fn = torch.nn.MSELoss()\n"
        "cfg = {'scale': 2.0, 'buf': torch.zeros(3)}\n"
        "gen = torch.Generator().manual_seed(1)\n"
        "count = 0\n"
        "def f(t, k=3):\n"
        "    global count\n"
        "    count += 1\n"
        "    noise = torch.randn(3, generator=gen) * rnd.random()\n"
        "    cfg['buf'].add_(noise)\n"
        "    return loss_fn(t * math.pi * cfg['scale'], t) + k\n"
        "part = functools.partial(f, k=4)\n"
        "t = torch.ones(3)\n"
    )
    r = reached(ns, "part(t)")
    assert r.problems == []
    assert set(r.tensors) == {"t", "cfg['buf']"}
    assert set(r.containers) == {"cfg"}
    assert set(r.generators) == {"gen"}
    assert [name for _, name in r.bindings] == ["count"]


def test_saved_state_puts_everything_back_bit_for_bit() -> None:
    ns = run_source(
        MODEL
        + "cache = {'last': None}\n"
        + "hits = 0\n"
        + "def train():\n"
        + "    global hits\n"
        + "    hits += 1\n"
        + "    cache['last'] = step()\n"
        + "    x.mul_(1.5)\n"
        + "    random.random()\n"
        + "    return cache['last']\n"
    )
    ns["random"] = random
    ns["step"]()  # AdamW's moments and the gradients exist
    model, opt = ns["model"], ns["opt"]
    named = Named({"model": model}, {"opt": opt})
    r = reached(ns, "train()", named)
    assert r.problems == []
    before = [t.clone() for t in [*model.parameters(), ns["x"]]]
    grads = [p.grad.clone() for p in model.parameters()]
    moments = {k: v.clone() for k, v in opt.state[model.weight].items()}
    rng, py_rng = torch.get_rng_state(), random.getstate()
    state = SavedState({"model": model}, {"opt": opt}, r)
    for _ in range(5):
        ns["train"]()
    model.eval()
    model.weight.data = torch.zeros(7)  # even a replaced .data comes back
    state.restore()
    assert state.mismatches() == []
    for a, b in zip([*model.parameters(), ns["x"]], before, strict=True):
        assert bitwise_equal(a, b)
    for p, g in zip(model.parameters(), grads, strict=True):
        assert bitwise_equal(p.grad, g)
    for k, v in moments.items():
        assert bitwise_equal(opt.state[model.weight][k], v)
    assert model.training
    assert ns["hits"] == 0
    assert ns["cache"] == {"last": None}
    assert torch.equal(torch.get_rng_state(), rng)
    assert random.getstate() == py_rng


def test_bitwise_equal_compares_bits_not_values() -> None:
    nan = torch.tensor([float("nan"), 1.0])
    assert bitwise_equal(nan, nan.clone())  # NaN == NaN, bit for bit
    assert not bitwise_equal(torch.tensor([0.0]), torch.tensor([-0.0]))
    assert not bitwise_equal(torch.ones(2), torch.ones(2, dtype=torch.float64))
    assert bitwise_equal(torch.ones(2, dtype=torch.bfloat16), torch.ones(2, dtype=torch.bfloat16))
    assert bitwise_equal(torch.arange(3), torch.arange(3))


def test_replay_finds_the_requested_peak_from_the_start() -> None:
    trace = [
        {"action": "segment_alloc", "size": 1 << 20},
        {"action": "alloc", "size": 1000},
        {"action": "alloc", "size": 3000},
        {"action": "free_requested", "size": 1000},  # still counted until completed
        {"action": "alloc", "size": 500},
        {"action": "free_completed", "size": 1000},
        {"action": "free_completed", "size": 3000},
    ]
    assert replay_peak(trace, start=100) == 100 + 1000 + 3000 + 500
    assert replay_peak([], start=42) == 42


def test_an_object_only_read_for_its_data_is_no_problem() -> None:
    ns = run_source(
        "from dataclasses import dataclass\n"
        "@dataclass\n"
        "class Run:\n"
        "    batch: int\n"
        "    data: torch.Tensor\n"
        "    def describe(self):\n"
        "        return str(self.batch)\n"
        "run = Run(4, torch.arange(8.0))\n"
        "def read():\n"
        "    return run.data[: run.batch].sum()\n"
        "def call():\n"
        "    return run.describe()\n"
        "def hand_on():\n"
        "    return str(run)\n"
    )
    r = reached(ns, "read()")
    assert r.problems == []
    assert set(r.tensors) == {"run.data"}  # what it reads is saved in turn
    assert problems(ns, "call()") == ["run: a Run, which it cannot look into"]
    assert problems(ns, "hand_on()") == ["run: a Run, which it cannot look into"]


def test_a_grad_scaler_is_put_back_through_its_state_dict() -> None:
    ns = run_source(
        MODEL + "scaler = torch.amp.GradScaler('cpu', init_scale=1024.0, growth_interval=1)\n"
        "def scaled():\n"
        "    opt.zero_grad()\n"
        "    scaler.scale(model(x).square().mean()).backward()\n"
        "    scaler.step(opt)\n"
        "    scaler.update()\n"
    )
    named = Named({"model": ns["model"]}, {"opt": ns["opt"]})
    r = reached(ns, "scaled()", named)
    assert r.problems == []
    assert set(r.stateful) == {"scaler"}
    scaler = ns["scaler"]
    ns["scaled"]()
    before = scaler.state_dict()
    state = SavedState(named.models, named.optimizers, r)
    for _ in range(3):
        ns["scaled"]()
    assert scaler.get_scale() == 2 * 2 * 2 * before["scale"]  # it grows every step
    scaler.unscale_(ns["opt"])  # as if a run had raised between unscale_ and update()
    state.restore()
    assert scaler.state_dict() == before
    assert scaler.get_scale() == before["scale"]
    assert not scaler._per_optimizer_states  # the next scaler.step() is not refused
    check = state.check()
    assert check.mismatched == []
    assert check.uncompared == {}
    ns["scaled"]()


def test_an_inference_tensor_is_put_back_in_inference_mode() -> None:
    ns = run_source(
        "with torch.inference_mode():\n"
        "    buf = torch.zeros(3)\n"
        "def f():\n"
        "    with torch.inference_mode():\n"
        "        buf.add_(1)\n"
    )
    r = reached(ns, "f()")
    assert set(r.tensors) == {"buf"}
    state = SavedState({}, {}, r)
    ns["f"]()
    state.restore()
    assert torch.equal(ns["buf"], torch.zeros(3))
    assert state.mismatches() == []


def test_enum_members_a_step_reads_are_no_problem() -> None:
    """A table of SDPBackend members (a pybind11 enum) made %tune refuse notebook 07's step."""
    import enum

    from torch.nn.attention import SDPBackend

    class Mode(enum.Enum):
        FAST = 1

    backends = {"flash": SDPBackend.FLASH_ATTENTION, "math": SDPBackend.MATH}
    ns: dict[str, Any] = {"backends": backends, "mode": Mode.FAST}
    assert problems(ns, "(backends['flash'], mode)") == []


def test_enum_members_are_values_with_nothing_to_put_back() -> None:
    # torch's SDPBackend is a pybind11 enum (notebook 07's model pins attention kernels from a
    # dict of them); a Python Enum's members are values too.
    ns = run_source(
        "import enum\n"
        "from torch.nn.attention import SDPBackend\n"
        "class Mode(enum.Enum):\n"
        "    FAST = 1\n"
        "BACKENDS = {'flash': SDPBackend.FLASH_ATTENTION, 'math': SDPBackend.MATH}\n"
        "def pick(name):\n"
        "    return BACKENDS[name], Mode.FAST\n"
    )
    r = reached(ns, "pick('math')")
    assert r.problems == []


def test_the_copys_room_on_the_gpu_leaves_the_runs_what_the_allocator_has_reserved() -> None:
    from jupyter_gpu.magics.replay.state import GPU_SHARE, room_beside_the_runs

    gib = 2**30
    # Notebook 07 on the H200 after a step at batch 93: 9 GiB free, 130 GiB reserved (the peak).
    # Free plus cached (some 133 GiB) took the 4.6 GiB copy onto the GPU, and the next steps ran
    # out of memory; beside the allocator's peak only the free 9 GiB are the copy's.
    room = room_beside_the_runs(9 * gib, 130 * gib, 130 * gib)
    assert room == 9 * gib
    assert 4.6 * gib > GPU_SHARE * room  # so the copy goes to the host
    # The cache emptied since the peak: the allocator would take 30 GiB of the free back.
    assert room_beside_the_runs(40 * gib, 100 * gib, 130 * gib) == 10 * gib
    assert room_beside_the_runs(20 * gib, 100 * gib, 130 * gib) == 0
    # A process that never reserved more than it holds now: all the free memory.
    assert room_beside_the_runs(100 * gib, 2 * gib, 2 * gib) == 100 * gib


def test_an_object_of_the_users_class_is_looked_into_and_put_back() -> None:
    # A method call on it (trainer.step()): its __dict__ is saved, each attribute judged on
    # its own (the model is named), and the method is followed, stores on self allowed.
    ns = run_source(OWN_CLASS)
    trainer = ns["trainer"]
    named = Named({"model": trainer.model})
    found = reached(ns, "trainer.step(3)", named)
    assert [p.sentence() for p in found.problems] == []
    assert found.containers == {"trainer": trainer, "trainer.seen": trainer.seen}
    assert found.named_routes == {"model": ["trainer.model"]}
    seen = trainer.seen
    state = SavedState(named.models, {}, found, what="test")
    trainer.step(3)
    assert (trainer.n, trainer.seen, trainer.last) == (6, [3], 3)
    state.restore()
    assert vars(trainer).keys() == {"model", "n", "seen"}  # .last, set by the run, is gone
    assert (trainer.n, trainer.seen) == (0, [])
    assert trainer.seen is seen
