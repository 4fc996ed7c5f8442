"""What ``%compile --bench`` and ``%amp compare`` put back after running a step many times.

A real IPython shell (conftest's ``shell``). Each test names what its step changes and checks
that it is as before afterwards, bit for bit, and that the report's "checked bit for bit" line
names only what was compared. ``%compile`` uses the eager backend: dynamo runs, nothing is
generated, so a bench takes seconds.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from .conftest import NET_CELL, Shell, training_bits

# A step as most training loops write it: SGD with momentum, a OneCycleLR stepped every step,
# a GradScaler that grows its scale every step (growth_interval=1). total_steps is large
# because --bench runs the step hundreds of times.
SCHEDULED_CELL = (
    NET_CELL
    + """
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=100_000)
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=1)
x = torch.randn(8, 16)
y = torch.randn(8, 4)

def train_step():
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    sched.step()
    return loss
"""
)


def schedule_bits(shell: Shell) -> dict[str, Any]:
    """The training bits plus what the scheduler and the scaler hold."""
    sched, scaler, opt = shell["sched"], shell["scaler"], shell["opt"]
    return training_bits(shell) | {
        "last_epoch": sched.last_epoch,
        "last_lr": list(sched.get_last_lr()),
        "lr": [g["lr"] for g in opt.param_groups],
        "momentum": [g["momentum"] for g in opt.param_groups],
        "scale": scaler.get_scale(),
        "scaler": scaler.state_dict(),
    }


@pytest.mark.slow
def test_bench_of_a_step_with_a_scheduler_and_a_scaler_puts_both_back(shell: Shell) -> None:
    shell.mid_training(SCHEDULED_CELL)  # momentum, a grown scale, a schedule under way
    before = schedule_bits(shell)
    ran = shell.ok('r = %compile model --backend eager --bench "train_step()" --optimizer opt -o')
    restored = shell["r"].bench.restored
    assert restored.runs > 20
    assert schedule_bits(shell) == before
    assert restored.exact, restored.line
    kinds = {p.label: p.kind for p in restored.parts}
    assert kinds["sched"] == kinds["scaler"] == "state_dict"
    assert "sched (state_dict)" in ran.text
    assert "scaler (state_dict)" in ran.text
    assert restored.changed == []  # the runs changed nothing else
    # The step still trains from here as it did before the bench.
    shell.ok("train_step()")
    assert shell["sched"].last_epoch == before["last_epoch"] + 1
    assert shell["scaler"].get_scale() == 2 * before["scale"]


def test_compare_of_a_step_with_a_scheduler_and_a_scaler_puts_both_back(shell: Shell) -> None:
    shell.mid_training(SCHEDULED_CELL)
    before = schedule_bits(shell)
    ran = shell.ok('r = %amp compare "train_step()" --model model --optimizer opt --runs 3 -o')
    r = shell["r"]
    assert all(m.error is None for m in r.results), [m.error for m in r.results]
    # Each mode started from the same state: the same schedule, the same scale (bf16's first
    # loss is fp32's but for rounding; tf32 is fp32 on a CPU and is not run apart).
    bf16 = next(m for m in r.results if m.mode == "bf16")
    assert bf16.loss_diff is not None
    assert bf16.loss_diff < 0.05
    assert schedule_bits(shell) == before
    assert r.restore.exact, r.restore.line
    assert "sched (state_dict)" in ran.text
    assert "scaler (state_dict)" in ran.text


TRAINER_CELL = """
class Trainer:
    def __init__(self, model, opt):
        self.model, self.opt = model, opt
        self.steps = 0
        self.losses = []

    def step(self):
        self.opt.zero_grad()
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.opt.step()
        self.steps += 1
        self.losses.append(loss.item())
        return loss

model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
x, y = torch.randn(8, 16), torch.randn(8, 4)
trainer = Trainer(model, opt)
trainer.step()
"""


def test_a_step_that_is_a_method_of_the_users_own_class_is_run_and_put_back(
    shell: Shell,
) -> None:
    # trainer.step() was refused ("a Trainer, which it cannot look into"); the trainer's
    # __dict__ is now put back and its method followed.
    shell.ok(NET_CELL + TRAINER_CELL)
    before = training_bits(shell)
    losses = shell["trainer"].losses
    ran = shell.ok('r = %amp compare "trainer.step()" --model model --optimizer opt --runs 3 -o')
    assert shell["r"].restore.exact, shell["r"].restore.line
    assert training_bits(shell) == before
    trainer = shell["trainer"]
    assert (trainer.steps, trainer.losses) == (1, losses)
    assert trainer.losses is losses
    assert "trainer, trainer.losses" in ran.text  # in the "checked bit for bit" line
    shell.refuses(
        {
            '%amp compare "trainer.step()" --model trainer.model': (
                "--model takes a notebook name, and trainer.model is an attribute: bind it to "
                "a name first (model = trainer.model), then --model model."
            )
        }
    )


TWO_MODELS_CELL = """
torch.manual_seed(3)
enc = torch.nn.Linear(16, 8)
dec = torch.nn.Linear(8, 4)
table = torch.randn(10, 16, requires_grad=True)  # an embedding table, not in any module
opt = torch.optim.AdamW([*enc.parameters(), *dec.parameters(), table], lr=0.5)
idx = torch.tensor([1, 2, 3, 4])
target = torch.randn(4, 4)

def pair_step():
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(dec(enc(table[idx])), target)
    loss.backward()
    opt.step()
    return loss
"""


def two_model_bits(shell: Shell) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("enc", "dec"):
        module = getattr(shell[name], "_orig_mod", shell[name])  # %compile binds the wrapper
        for key, value in module.state_dict().items():
            out[f"{name}.{key}"] = value.numpy().tobytes()
    out["table"] = shell["table"].detach().numpy().tobytes()
    grads = [shell["table"], *shell["dec"].parameters()]
    out["grads"] = [None if t.grad is None else t.grad.numpy().tobytes() for t in grads]
    state = shell["opt"].state_dict()["state"]
    for i, per_param in state.items():
        out |= {f"o.{i}.{k}": v.numpy().tobytes() for k, v in per_param.items()}
    return out


def test_compare_puts_back_what_the_optimizer_steps_outside_the_named_model(shell: Shell) -> None:
    shell.ok(TWO_MODELS_CELL)
    shell.ok("pair_step()")  # AdamW's moments exist; the gradients too
    shell.ok("opt.zero_grad(set_to_none=True)")  # ... and are None again, as before a step
    before = two_model_bits(shell)
    assert before["grads"] == [None, None, None]
    ran = shell.ok('r = %amp compare "pair_step()" --model enc --optimizer opt --runs 3 -o')
    r = shell["r"]
    assert two_model_bits(shell) == before  # the gradients too: None, as they were
    # fp32's first step is the step the notebook would take now (not one on stepped weights).
    fp32 = next(m for m in r.results if m.mode == "fp32")
    shell.ok("again = pair_step().item()")
    assert fp32.loss == pytest.approx(shell["again"], rel=1e-6)
    # dec's two and the table: values, gradients and hooks saved with the optimizer
    assert "opt (and its 3 parameter(s) outside enc)" in ran.text
    assert r.restore.exact, r.restore.line


def test_bench_puts_back_what_the_optimizer_steps_outside_the_named_model(shell: Shell) -> None:
    shell.ok(TWO_MODELS_CELL)
    shell.ok("pair_step()")
    before = two_model_bits(shell)
    ran = shell.ok('r = %compile enc --backend eager --bench "pair_step()" --optimizer opt -o')
    assert two_model_bits(shell) == before
    restored = shell["r"].bench.restored
    assert restored.exact, restored.line
    assert "opt (and its 3 parameter(s) outside enc)" in ran.text


HOOK_CELL = """
class HookNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 4)

    def forward(self, t):
        return self.fc(t)

model = HookNet()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 16)
seen = []

def note(module, args, out):
    pass

def hooked_step():
    model.register_forward_hook(note)  # a new hook on every run
    model.fc.weight.register_hook(lambda g: g)  # and one on a parameter's gradient
    opt.zero_grad()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    return loss
"""


def test_hooks_added_on_every_run_are_gone_afterwards(shell: Shell) -> None:
    shell.ok(HOOK_CELL)
    ran = shell.ok('r = %amp compare "hooked_step()" --model model --optimizer opt --runs 3 -o')
    r = shell["r"]
    model = shell["model"]
    assert len(model._forward_hooks) == 0
    assert not model.fc.weight._backward_hooks
    assert r.restore.exact, r.restore.line
    assert "model's hooks" in r.restore.changed
    assert "the runs had changed model's hooks" in ran.text


def test_bench_removes_the_hooks_its_runs_added(shell: Shell) -> None:
    shell.ok(HOOK_CELL)
    ran = shell.ok('r = %compile model --backend eager --bench "hooked_step()" --optimizer opt -o')
    compiled = shell["model"]  # the compiled wrapper: the compiled runs hooked it
    assert len(compiled._forward_hooks) == 0
    assert len(compiled._orig_mod._forward_hooks) == 0
    assert not compiled._orig_mod.fc.weight._backward_hooks
    assert "the runs had changed model's hooks" in ran.text


SETTINGS_CELL = """
import logging, os, sys
log = logging.getLogger("jupyter_gpu_test")  # a logger that exists before the runs
x = torch.randn(8, 16)
lin = torch.nn.Linear(16, 4)

def careless_step():
    torch.autograd.set_detect_anomaly(True)
    torch.set_autocast_enabled("cpu", True)  # autocast switched on, never off
    os.environ["JUPYTER_GPU_TEST_FLAG"] = "1"
    sys.path.append("jupyter-gpu-test-folder")
    return lin(x).sum()

def logged_step():
    log.setLevel(logging.DEBUG)
    torch.set_num_threads(1)
    return lin(x).sum()
"""


@pytest.fixture
def process_settings() -> Iterator[None]:
    """Whatever the magic does, the test leaves this process's settings as they were."""
    import logging

    path, threads = list(sys.path), torch.get_num_threads()
    yield
    torch.set_anomaly_enabled(False)
    torch.set_autocast_enabled("cpu", False)
    os.environ.pop("JUPYTER_GPU_TEST_FLAG", None)
    sys.path[:] = path
    logging.getLogger("jupyter_gpu_test").setLevel(logging.NOTSET)
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("process_settings")
def test_anomaly_mode_an_environment_variable_and_sys_path_are_put_back(shell: Shell) -> None:
    shell.ok(SETTINGS_CELL)
    path = list(sys.path)
    ran = shell.ok('r = %amp compare "careless_step()" --model lin --modes fp32,bf16 --runs 3 -o')
    assert torch.is_anomaly_enabled() is False
    assert torch.is_autocast_enabled("cpu") is False
    assert "JUPYTER_GPU_TEST_FLAG" not in os.environ
    assert sys.path == path
    restored = shell["r"].restore
    assert restored.exact, restored.line
    settings = {p.label for p in restored.parts if p.kind == "setting"}
    assert {"anomaly mode", "autocast", "os.environ", "sys.path", "logging levels"} <= settings
    # (autocast: %amp compare sets it per mode and back, so the runs leave it as it was)
    assert {"anomaly mode", "os.environ", "sys.path"} <= set(restored.changed)
    assert f"{len(settings)} process-wide settings" in ran.text
    assert "the runs had changed anomaly mode, os.environ, sys.path (put back)" in ran.text


@pytest.mark.usefixtures("process_settings")
def test_a_loggers_level_and_the_thread_count_are_put_back(shell: Shell) -> None:
    import logging

    shell.ok(SETTINGS_CELL)
    threads = torch.get_num_threads()
    shell.ok('r = %amp compare "logged_step()" --model lin --modes fp32 --runs 3 -o')
    assert logging.getLogger("jupyter_gpu_test").level == logging.NOTSET
    assert torch.get_num_threads() == threads
    restored = shell["r"].restore
    assert restored.exact, restored.line
    assert {"logging levels", "threads"} <= set(restored.changed) or threads == 1


@pytest.mark.usefixtures("process_settings")
def test_a_step_that_leaves_os_environ_alone_keeps_what_torch_adds_to_it(shell: Shell) -> None:
    # torch's compiler sets TORCHINDUCTOR_CACHE_DIR and others for itself and relies on them
    # later: os.environ and sys.path are saved only where the step touches them.
    shell.ok("lin = torch.nn.Linear(4, 2)\nx = torch.randn(3, 4)")
    shell.ok('r = %amp compare "lin(x).sum()" --model lin --modes fp32 --runs 3 -o')
    labels = {p.label for p in shell["r"].restore.parts}
    assert "os.environ" not in labels
    assert "sys.path" not in labels
    assert "anomaly mode" in labels


STATEFUL_CELL = """
class Ema:
    # An EMA helper of the notebook's own: its state is its state_dict.
    def __init__(self, module, decay):
        self.decay = decay
        self.updates = 0
        self.shadow = {k: v.detach().clone() for k, v in module.state_dict().items()}

    def update(self, module):
        self.updates += 1
        for k, v in module.state_dict().items():
            self.shadow[k].mul_(self.decay).add_(v.detach(), alpha=1 - self.decay)

    def state_dict(self):
        return {"decay": self.decay, "updates": self.updates, "shadow": self.shadow}

    def load_state_dict(self, state):
        self.decay, self.updates = state["decay"], state["updates"]
        self.shadow = state["shadow"]

class Tag:  # no __eq__ of its own: a copy of it cannot be compared with it
    pass

class Tagged(Ema):
    def state_dict(self):
        return {**super().state_dict(), "tag": Tag()}

    def load_state_dict(self, state):
        super().load_state_dict(state)

lin = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
ema = Ema(lin, 0.9)
tagged = Tagged(lin, 0.5)
x = torch.randn(8, 16, requires_grad=True)

def ema_step():
    opt.zero_grad()
    loss = lin(x).square().mean()
    loss.backward()
    opt.step()
    ema.update(lin)
    tagged.update(lin)
    return loss
"""


def test_the_checked_line_names_only_what_was_compared(shell: Shell) -> None:
    shell.ok(STATEFUL_CELL)
    before = {k: v.clone() for k, v in shell["ema"].shadow.items()}
    ran = shell.ok('r = %amp compare "ema_step()" --model lin --optimizer opt --runs 3 -o')
    restored = shell["r"].restore
    assert shell["ema"].updates == 0
    assert all(torch.equal(shell["ema"].shadow[k], v) for k, v in before.items())
    assert shell["tagged"].updates == 0  # put back too...
    compared = {p.label for p in restored.parts if p.compared}
    assert {"lin", "opt", "ema", "x", "x.grad", "the RNG"} <= compared
    assert "tagged" not in compared  # ... but not compared: its Tag cannot be
    assert [p.label for p in restored.uncompared] == ["tagged"]
    assert not restored.exact
    line = next(text for text in ran.text.splitlines() if "checked bit for bit" in text)
    checked, _, rest = line.partition("; put back but not compared: ")
    assert "tagged" not in checked
    assert "ema (state_dict)" in checked
    assert "x.grad" in checked
    assert rest.startswith("tagged: its state_dict holds objects it cannot compare")
