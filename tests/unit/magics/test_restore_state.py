"""What the repeated-runs helper saves beyond tensors, puts back, and says it compared.

Real torch objects in plain namespaces (``reach`` reads any globals dict); the magics' own
tests (tests/integration/magics/test_restore.py) run the same through a real IPython shell.
"""

from __future__ import annotations

import logging
import os
import sys
import types
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from jupyter_gpu.magics.probes.precision import Tf32Settings
from jupyter_gpu.magics.replay.equality import same_value
from jupyter_gpu.magics.replay.reach import Named
from jupyter_gpu.magics.replay.runs import Restored, RestoredPart, restored_line
from jupyter_gpu.magics.replay.settings import SavedSettings
from jupyter_gpu.magics.replay.state import SavedState, bitwise_equal
from jupyter_gpu.magics.shell.lazy_torch import cuda_in_use
from tests.unit.magics.cell_namespace import reached, run_source

# ------------------------------------------------------------------ process-wide settings


@pytest.fixture
def settings_guard() -> Iterator[SavedSettings]:
    """A second save of every setting, put back after the test whatever it did."""
    guard = SavedSettings({"os.environ", "sys.path"})
    yield guard
    guard.restore()


def change_every_setting() -> set[str]:
    """What a careless training step can leave switched, one of each; the names it could not.

    The current CUDA device is a setting only in a process that uses CUDA (an earlier test in
    the worker may have), and switchable only where there are two GPUs.
    """
    torch.set_anomaly_enabled(True, False)
    torch.set_autocast_enabled("cpu", True)
    torch.set_autocast_dtype("cpu", torch.float16)
    torch.autocast("cpu", dtype=torch.bfloat16).__enter__()  # entered, never left
    torch.set_autocast_cache_enabled(False)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark
    torch.set_float32_matmul_precision("medium")
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.enable_flash_sdp(False)
    torch.set_num_threads(max(1, torch.get_num_threads() - 1) if torch.get_num_threads() > 1 else 2)
    torch.set_default_dtype(torch.float64)
    torch.set_default_device("cpu")
    torch.set_printoptions(precision=11)
    np.set_printoptions(precision=3)
    np.seterr(all="raise")
    logging.getLogger("jupyter_gpu.settings_test").setLevel(logging.DEBUG)
    logging.disable(logging.WARNING)
    torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: None)
    torch.set_grad_enabled(False)
    os.environ["JUPYTER_GPU_SETTINGS_TEST"] = "1"
    sys.path.append("jupyter-gpu-settings-test")
    if cuda_in_use() and torch.cuda.device_count() > 1:  # when SavedSettings has the setting
        torch.cuda.set_device((torch.cuda.current_device() + 1) % torch.cuda.device_count())
        return set()
    return {"current CUDA device"}


@pytest.mark.usefixtures("settings_guard")
def test_every_setting_a_step_can_switch_is_put_back_and_named() -> None:
    logging.getLogger("jupyter_gpu.settings_test")  # exists before, as a notebook's would
    before_tf32 = Tf32Settings.read()
    saved = SavedSettings({"os.environ", "sys.path"})
    unchanged = change_every_setting()
    assert set(saved.mismatches()) == set(saved.names) - unchanged
    changed = saved.restore()
    assert saved.mismatches() == []
    assert saved.failed == {}
    assert set(changed) == set(saved.names) - unchanged  # each was changed, and each is named
    assert torch.is_anomaly_enabled() is False
    assert torch.is_autocast_enabled("cpu") is False
    assert torch.get_autocast_dtype("cpu") == torch.bfloat16
    assert Tf32Settings.read() == before_tf32
    assert torch.get_default_dtype() == torch.float32
    assert torch.empty(1).dtype == torch.float32
    assert torch._tensor_str.PRINT_OPTS.precision == 4
    assert logging.getLogger("jupyter_gpu.settings_test").level == logging.NOTSET
    assert logging.root.manager.disable == logging.NOTSET
    assert not torch.nn.modules.module._global_forward_hooks
    assert torch.is_grad_enabled()
    assert "JUPYTER_GPU_SETTINGS_TEST" not in os.environ
    assert "jupyter-gpu-settings-test" not in sys.path
    # Autocast's nesting is back to none: a context closed now empties its cache again.
    depth = torch.autocast_increment_nesting()
    torch.autocast_decrement_nesting()
    assert depth == 1


def test_os_environ_and_sys_path_are_saved_where_the_code_touches_them() -> None:
    ns = run_source(
        "import os, sys\n"
        "from os import environ\n"
        "def plain():\n    return 1\n"
        "def env():\n    os.environ['A'] = '1'\n"
        "def env_name():\n    environ['A'] = '1'\n"
        "def putenv():\n    os.putenv('A', '1')\n"
        "def path():\n    sys.path.insert(0, 'x')\n"
    )
    assert reached(ns, "plain()").process == set()
    for expr in ("env()", "env_name()", "putenv()"):
        assert reached(ns, expr).process == {"os.environ"}, expr
        assert reached(ns, expr).problems == []
    assert reached(ns, "path()").process == {"sys.path"}
    assert "sys.path" not in reached(ns, "path()").containers  # a setting, not a list
    names = SavedState({}, {}, reached(ns, "path()")).settings.names
    assert "sys.path" in names
    assert "os.environ" not in names


# ------------------------------------------------------------------ modules and optimizers


def test_a_modules_hooks_submodules_and_class_are_put_back() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    x = torch.randn(3, 4)
    expected = model(x).detach()
    cls, children = type(model[0]), dict(model._modules)
    state = SavedState({"model": model}, {})
    model.register_forward_hook(lambda m, i, o: o * 0)
    model[0].register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    model[2].weight.register_hook(lambda g: g * 0)
    model.register_state_dict_post_hook(lambda *a: None)
    model.add_module("extra", torch.nn.Linear(2, 2))
    model[0].register_buffer("counter", torch.zeros(1))
    torch.nn.utils.parametrize.register_parametrization(model[0], "weight", torch.nn.Tanh())
    assert type(model[0]) is not cls  # parametrize swaps the class
    state.restore()
    assert state.mismatches() == []
    assert {"model's hooks", "model's submodules", "model's buffers"} <= set(state.changed)
    assert type(model[0]) is cls
    assert dict(model._modules) == children
    assert not model._forward_hooks
    assert not model[0]._forward_pre_hooks
    assert not model._state_dict_hooks
    assert "counter" not in model[0]._buffers
    assert torch.equal(model(x), expected)
    model(x).sum().backward()
    assert model[2].weight.grad is not None
    assert model[2].weight.grad.abs().sum() > 0  # the gradient hook that zeroed it is gone


def test_parameters_the_optimizer_steps_outside_the_named_model_are_put_back() -> None:
    ns = run_source(
        "torch.manual_seed(0)\n"
        "enc = torch.nn.Linear(4, 3)\n"
        "dec = torch.nn.Linear(3, 2)\n"
        "scale = torch.ones(2, requires_grad=True)\n"
        "opt = torch.optim.AdamW([*enc.parameters(), *dec.parameters(), scale], lr=0.5)\n"
        "x = torch.randn(5, 4)\n"
        "def step():\n"
        "    opt.zero_grad()\n"
        "    loss = (dec(enc(x)) * scale).square().mean()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    return loss\n"
    )
    named = Named({"enc": ns["enc"]}, {"opt": ns["opt"]})
    r = reached(ns, "step()", named)
    assert r.problems == []  # dec and scale are saved with the optimizer that steps them
    assert set(r.modules) == {"dec"}
    outside = [*ns["dec"].parameters(), ns["scale"]]
    before = [t.detach().clone() for t in outside]
    state = SavedState(named.models, named.optimizers, r)
    for _ in range(3):
        ns["step"]()
    state.restore()
    check = state.check()
    assert check.mismatched == []
    assert all(bitwise_equal(t, b) for t, b in zip(outside, before, strict=True))
    assert all(t.grad is None for t in outside)
    parts = {p.label: p for p in state.parts(check)}
    assert parts["opt"].detail == "and its 3 parameter(s) outside enc"
    assert parts["dec"].kind == "module"


def test_a_reached_leaf_tensors_gradient_is_put_back() -> None:
    ns = run_source(
        "w = torch.randn(3, requires_grad=True)\ndef step():\n    (w * 2).sum().backward()\n"
    )
    r = reached(ns, "step()")
    state = SavedState({}, {}, r)
    ns["step"]()
    assert ns["w"].grad is not None
    state.restore()
    assert ns["w"].grad is None
    check = state.check()
    assert check.mismatched == []
    assert "w.grad" in [p.label for p in state.parts(check) if p.kind == "gradient"]


# ------------------------------------------------------------------ objects with state_dict


SCHEDULED = """
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=1000)
x = torch.randn(3, 4)
def step():
    opt.zero_grad()
    model(x).square().mean().backward()
    opt.step()
    sched.step()
"""


def test_a_scheduler_is_put_back_through_its_state_dict() -> None:
    ns = run_source(SCHEDULED)
    named = Named({"model": ns["model"]}, {"opt": ns["opt"]})
    r = reached(ns, "step()", named)
    assert r.problems == []
    assert set(r.stateful) == {"sched"}
    sched, opt = ns["sched"], ns["opt"]
    ns["step"]()
    epoch, last_lr = sched.last_epoch, sched.get_last_lr()
    lr, momentum = opt.param_groups[0]["lr"], opt.param_groups[0]["momentum"]
    state = SavedState(named.models, named.optimizers, r)
    for _ in range(5):
        ns["step"]()
    assert sched.last_epoch == epoch + 5
    for _ in range(2):  # twice: %amp compare puts it back before every mode
        state.restore()
        assert sched.last_epoch == epoch
        assert sched.get_last_lr() == last_lr
        assert opt.param_groups[0]["lr"] == lr
        assert opt.param_groups[0]["momentum"] == momentum
        ns["step"]()
    state.restore()
    check = state.check()
    assert check.mismatched == []
    assert check.uncompared == {}


def test_a_scheduler_over_an_optimizer_that_is_not_named_is_refused() -> None:
    ns = run_source(SCHEDULED)
    found = [p.sentence() for p in reached(ns, "sched.step()").problems]
    assert found == [
        "sched: a OneCycleLR over a SGD that is not named: each run changes that optimizer's "
        "param_groups (name it with --optimizer)"
    ]


def test_an_ema_class_of_the_notebooks_own_is_followed_and_saved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # In IPython, __main__ is the notebook's own module (no file); under pytest it is pytest's.
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
    ns = run_source(
        "class Ema:\n"
        "    def __init__(self):\n"
        "        self.n = 0\n"
        "        self.avg = torch.zeros(2)\n"
        "    def update(self, v):\n"
        "        self.n += 1  # an attribute set on itself: its state_dict holds it\n"
        "        self.avg.mul_(0.5).add_(v)\n"
        "    def state_dict(self):\n"
        "        return {'n': self.n, 'avg': self.avg}\n"
        "    def load_state_dict(self, state):\n"
        "        self.n, self.avg = state['n'], state['avg']\n"
        "    def dump(self):\n"
        "        torch.save(self.avg, 'ema.pt')\n"
        "ema = Ema()\n"
    )
    assert reached(ns, "ema.update(torch.ones(2))").problems == []
    # its methods are read: one that writes a file is still named
    assert any("calls .save()" in p.what for p in reached(ns, "ema.dump()").problems)
    state = SavedState({}, {}, reached(ns, "ema.update(torch.ones(2))"))
    ns["ema"].update(torch.ones(2))
    state.restore()
    assert ns["ema"].n == 0
    assert torch.equal(ns["ema"].avg, torch.zeros(2))
    assert state.check().mismatched == []


def test_a_state_dict_that_cannot_be_compared_is_said_so() -> None:
    ns = run_source(
        "class Tag:\n    pass\n"
        "class Holder:\n"
        "    def __init__(self):\n"
        "        self.tag = Tag()\n"
        "    def state_dict(self):\n"
        "        return {'tag': self.tag}\n"
        "    def load_state_dict(self, state):\n"
        "        self.tag = state['tag']\n"
        "holder = Holder()\n"
    )
    r = reached(ns, "holder.state_dict()")
    state = SavedState({}, {}, r)
    state.restore()
    check = state.check()
    assert check.mismatched == []
    assert check.uncompared == {"holder": "its state_dict holds objects it cannot compare"}
    parts = {p.label: p for p in state.parts(check)}
    assert parts["holder"].compared is False


# ------------------------------------------------------------------ what the line says


def test_the_line_names_as_checked_only_what_was_compared() -> None:
    parts = [
        RestoredPart("model", "model"),
        RestoredPart("opt", "optimizer", detail="and its 3 parameter(s) outside model"),
        RestoredPart("sched", "state_dict", detail="state_dict"),
        RestoredPart("tagged", "state_dict", compared=False, detail="its state_dict holds X"),
        RestoredPart("x.grad", "gradient"),
        RestoredPart("the RNG", "rng"),
        RestoredPart("anomaly mode", "setting"),
        RestoredPart("os.environ", "setting"),
    ]
    r = Restored(runs=1042, parts=parts, changed=["model's hooks", "anomaly mode"])
    line = restored_line(r)
    assert line == (
        "Restored after 1,042 runs, checked bit for bit: model, opt (and its 3 parameter(s) "
        "outside model), sched (state_dict), x.grad, the RNG, 2 process-wide settings; the runs "
        "had changed model's hooks, anomaly mode (put back); put back but not compared: "
        "tagged: its state_dict holds X."
    )
    assert r.names == ["model", "opt", "sched", "x.grad", "the RNG", "anomaly mode", "os.environ"]
    assert not r.exact  # something was not compared
    r = Restored(runs=3, parts=parts[:3], mismatched=["sched (state_dict)"])
    assert restored_line(r).startswith(
        "Put back after 3 runs: model, opt (and its 3 parameter(s) outside model), sched "
        "(state_dict); but 1 differ from their saved copy (sched (state_dict))"
    )
    assert "checked bit for bit" not in restored_line(r)


def test_same_value_says_when_it_cannot_tell() -> None:
    class Plain:
        pass

    a = Plain()
    assert same_value(a, a) is True
    assert same_value(a, Plain()) is None
    assert same_value(a, Plain(), identity=True) is False
    assert same_value({"x": [1.0, float("nan")]}, {"x": [1.0, float("nan")]}) is True
    assert same_value((torch.zeros(2),), (torch.zeros(2),)) is True
    assert same_value((torch.zeros(2),), (-torch.zeros(2),)) is False  # -0.0, bit for bit
    assert same_value(np.arange(3), np.arange(3)) is True
    assert same_value([1, Plain()], [2, Plain()]) is False  # a difference it can see wins
