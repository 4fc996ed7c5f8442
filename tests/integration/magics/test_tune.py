"""``%tune`` in a real IPython shell on the CPU: each fix kind, the ranking, the restore, Ctrl-C,
bad input, ``--apply`` and ``-o``, and the CPU target (a step starved by its DataLoader).

Steps are tiny (CI has 2 cores) and budgets short. The starved step's DataLoader waits on "I/O"
(a sleep per batch read, as a dataset reading files does: the CPU is free meanwhile) and its
loader has no workers; the wait is set from the measured step so that loading a batch takes
about as long as the step's own compute, where one worker (what a 2-CPU quota allows) hides it
all: about 2x by construction, and the target asks for 1.5x.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import pytest
import torch

from jupyter_gpu.host.cpus import dataloader_workers

from .conftest import MODEL_CELL, Shell, training_bits

# The step's own compute on one thread (steadier on 2 busy cores than two threads, which wait
# on each other when one is descheduled), then batches from a DataLoader without workers whose
# dataset waits a given time for each batch it reads (one wait per batch: a sleep per item of
# a few µs would last several times longer than asked).
STARVED_CELL = """
import time
torch.set_num_threads(1)

class Wide(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(512, 4096)
        self.fc2 = torch.nn.Linear(4096, 4)

    def forward(self, t):
        return self.fc2(torch.relu(self.fc1(t)))

class Files(torch.utils.data.Dataset):
    def __init__(self, wait):
        self.wait = wait
        self.x = torch.randn(4096, 512)
        self.y = torch.randn(4096, 4)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.__getitems__([i])[0]

    def __getitems__(self, indices):  # the DataLoader reads a batch's items in one call
        time.sleep(self.wait)  # reading them: the CPU waits
        return [(self.x[i], self.y[i]) for i in indices]

model = Wide()
opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

def compute(x, y):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss
"""
BATCH = 64


def _calibrate(shell: Shell) -> float:
    """The step's compute time on a fixed batch (median of 15), for the loader's wait."""
    shell.ok(
        "_xb, _yb = torch.randn(64, 512), torch.randn(64, 4)\nfor _ in range(3): compute(_xb, _yb)"
    )
    times = []
    for _ in range(15):
        start = time.perf_counter()
        shell.ip.user_ns["compute"](shell["_xb"], shell["_yb"])
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@pytest.fixture
def starved(shell: Shell) -> Any:
    """The starved step: ``train_step()`` draws from ``batches = iter(loader)``."""
    if dataloader_workers() < 1:
        pytest.skip("one CPU: a DataLoader worker would take turns with the step")
    threads = torch.get_num_threads()
    shell.ok(STARVED_CELL)
    compute_s = _calibrate(shell)
    wait = max(compute_s, 0.004)
    shell.ok(
        f"loader = torch.utils.data.DataLoader(Files({wait!r}), batch_size={BATCH}, "
        "shuffle=True)\n"
        "batches = iter(loader)\n"
        "next(batches)  # the user's iterator, one batch in\n"
        "def train_step():\n"
        "    x, y = next(batches)\n"
        "    return compute(x, y)\n"
        "train_step()\n"
    )
    yield shell
    torch.set_num_threads(threads)


def loader_state(shell: Shell) -> dict[str, Any]:
    """The user's loader and iterator: identity, settings, and where the iterator is."""
    loader, batches = shell["loader"], shell["batches"]
    return {
        "loader": id(loader),
        "batches": id(batches),
        "workers": loader.num_workers,
        "pin": loader.pin_memory,
        "yielded": batches._num_yielded,
        "sampler": id(loader.sampler),
    }


def test_a_starved_step_gets_its_input_pipeline_first_and_everything_back(starved: Shell) -> None:
    shell = starved
    before = training_bits(shell)
    loader_before = loader_state(shell)
    ran = shell.ok(
        'r = %tune "train_step()" --model model --optimizer opt --batches batches '
        "--loader loader --skip compile --budget 60s -o"
    )
    result = shell["r"]
    top = result.fixes[0]
    assert top.name == "input pipeline", ran.text
    assert top.kept
    assert top.speedup >= 1.5, ran.text
    assert top.interval[0] > 1.0
    assert "drawing real batches" in top.source
    assert any("the loader alone" in n for n in top.notes)
    assert any("one fixed batch" in n for n in top.notes)
    # Ranked best first: kept fixes by speedup, then the others.
    keys = [(not f.kept, -(f.speedup or 0.0)) for f in result.fixes if f.speedup is not None]
    assert keys == sorted(keys)
    # Afterwards the model, the optimizer, the RNG, the loader and the user's iterator are as
    # they were: the iterator had drawn one batch, and draws the second next.
    assert training_bits(shell) == before
    assert loader_state(shell) == loader_before
    assert result.restored.exact, result.restored.line
    assert "num_workers" in result.code
    assert "input pipeline" in ran.text


def test_apply_binds_the_new_loader_and_the_batches_to_it(starved: Shell) -> None:
    shell = starved
    old_loader = shell["loader"]
    ran = shell.ok(
        'r = %tune "train_step()" --model model --optimizer opt --batches batches '
        "--only loader --budget 60s --apply -o"
    )
    result = shell["r"]
    assert result.fixes, ran.text
    fix = result.fixes[0]
    assert fix.name == "input pipeline", ran.text
    if not fix.kept:
        pytest.fail(f"the starved step's loader fix was not kept: {fix.describe()}\n{ran.text}")
    new = shell["loader"]
    try:
        assert new is not old_loader
        assert new.num_workers == dataloader_workers()
        assert new.persistent_workers
        assert new.dataset is old_loader.dataset
        assert new.batch_size == old_loader.batch_size
        assert any(a.startswith("applied input pipeline") for a in result.applied)
        x, _y = next(shell["batches"])  # the notebook's iterator draws from the new loader
        assert x.shape == (BATCH, 512)
        shell.ok("train_step()")
        assert "applied input pipeline" in ran.text
    finally:
        shell.ok("del batches; loader._iterator = None")  # its workers stop with it


def test_ctrl_c_stops_puts_everything_back_and_reports_what_was_measured(shell: Shell) -> None:
    shell.ok(MODEL_CELL)
    shell.ok(
        "user_opt = opt\n"
        "def train_step():\n"
        "    if opt is not user_opt:  # Ctrl-C, while the rebuilt optimizer is tried\n"
        "        raise KeyboardInterrupt\n"
        "    opt.zero_grad()\n"
        "    loss = torch.nn.functional.mse_loss(model(x), y)\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    return loss\n"
        "train_step()"
    )
    before = training_bits(shell)
    ran = shell.ok(
        'r = %tune "train_step()" --model model --optimizer opt --only autocast,optimizer '
        "--budget 60s -o"
    )
    result = shell["r"]
    assert result.interrupted
    assert "Stopped by Ctrl-C" in ran.text
    assert shell["opt"] is shell["user_opt"]
    assert training_bits(shell) == before
    assert result.restored is not None
    assert result.restored.mismatched == []
    stopped = [n for n in result.not_tried if n.reason == "interrupted"]
    assert [n.name for n in stopped] == ["fused optimizer"]
    assert result.stack is None
    assert result.profile is not None  # the step as it was was measured before
    assert [f.name for f in result.fixes] in ([], ["bf16 autocast"])


# A small CNN: a convolution holds most of the step; the optimizer is AdamW (for-loop on CPU).
CNN_CELL = """
torch.set_num_threads(1)

class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 32, 3, padding=1)
        self.head = torch.nn.Linear(32, 4)

    def forward(self, t):
        return self.head(torch.relu(self.conv(t)).mean(dim=(2, 3)))

model = Cnn()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(16, 8, 24, 24)
y = torch.randn(16, 4)

def train_step():
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss

train_step()
"""


def test_each_cpu_fix_kind_is_tried_with_its_code_and_the_model_comes_back(shell: Shell) -> None:
    threads = torch.get_num_threads()
    try:
        shell.ok(CNN_CELL)
        before = training_bits(shell)
        memory_format = shell["model"].conv.weight.stride()
        ran = shell.ok(
            'r = %tune "train_step()" --model model --optimizer opt --only '
            "precision,optimizer,conv,threads --budget 40s -o"
        )
    finally:
        torch.set_num_threads(threads)
    result = shell["r"]
    tried = {f.name: f for f in result.fixes}
    skipped = {n.name: n.why for n in result.not_tried}
    assert "fused optimizer" in tried, ran.text
    assert "channels_last" in tried, ran.text
    assert any(name.endswith("CPU threads") for name in tried), ran.text
    if "bf16 autocast" not in tried:  # a CPU without bf16 says so instead
        assert "bf16 instructions" in skipped["bf16 autocast"]
    assert "TF32" in " ".join(skipped)  # a GPU's fix: one line, why
    assert "cudnn.benchmark" in skipped
    for fix in result.fixes:
        assert fix.interval is not None
        assert fix.interval[0] <= fix.speedup <= fix.interval[1]
        assert fix.memory_delta_bytes is None  # no allocator peak on a CPU
        assert fix.code
        assert isinstance(fix.kept, bool)
    assert tried["fused optimizer"].loss_delta == 0.0  # the same update, fused
    assert "fused=True" in tried["fused optimizer"].code
    assert "channels_last" in tried["channels_last"].code
    assert shell["model"].conv.weight.stride() == memory_format  # converted back
    assert torch.get_num_threads() == threads
    assert training_bits(shell) == before
    assert result.restored.exact, result.restored.line
    assert result.profile.flops_per_step > 0
    assert "MFU: none" in ran.text  # no data-sheet peak for a CPU, and it says so


def test_a_loader_the_step_iterates_is_rebound_and_put_back(shell: Shell) -> None:
    shell.ok(
        "class Items(torch.utils.data.Dataset):\n"
        "    def __len__(self): return 32\n"
        "    def __getitem__(self, i): return torch.full((4,), float(i)), torch.ones(2)\n"
        "loader = torch.utils.data.DataLoader(Items(), batch_size=8)\n"
        "model = torch.nn.Linear(4, 2)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=1e-3)\n"
        "def epoch():\n"
        "    for xb, yb in loader:\n"
        "        opt.zero_grad()\n"
        "        loss = torch.nn.functional.mse_loss(model(xb), yb)\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "    return loss\n"
    )
    original = shell["loader"]
    before = training_bits(shell)
    shell.ok('r = %tune "epoch()" --model model --optimizer opt --loader loader --only loader -o')
    result = shell["r"]
    assert shell["loader"] is original
    assert training_bits(shell) == before
    names = [f.name for f in result.fixes] + [n.name for n in result.not_tried]
    assert "input pipeline" in names


@pytest.mark.slow
def test_compile_is_tried_with_its_compile_time_apart(shell: Shell) -> None:
    shell.ok(MODEL_CELL)
    model = shell["model"]
    before = training_bits(shell)
    ran = shell.ok(
        'r = %tune "train_step()" --model model --optimizer opt --only compile --budget 120s -o'
    )
    result = shell["r"]
    fix = next(f for f in result.fixes if f.name == "torch.compile")
    assert any("compile time, apart from the steady gain" in n for n in fix.notes), ran.text
    assert fix.code.startswith("%compile model")
    assert shell["model"] is model  # the eager model is back under its name
    assert training_bits(shell) == before
    skipped = {n.name: n.why for n in result.not_tried}
    assert "needs a GPU" in skipped["torch.compile reduce-overhead"]


def test_bad_input_is_a_usage_error_that_changes_nothing(shell: Shell) -> None:
    shell.ok(MODEL_CELL)
    shell.ok(
        "data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=2)\n"
        "it = iter(data)\n"
        "def drawing_step():\n"
        "    xb, yb = next(it)\n"
        "    return torch.nn.functional.mse_loss(model(xb), yb)\n"
    )

    def names() -> set[str]:
        return {k for k in shell.ip.user_ns if not k.startswith("_")}

    before = names()
    iterator = shell["it"]
    cases = {
        "%tune": "one expression in quotes",
        '%tune "train_step()"': "needs --model",
        '%tune "train_step()" --model x': "not a torch.nn.Module",
        '%tune "train_step()" --model nope': "no variable named nope",
        '%tune "train_step()" --model model --optimizer model': "not a torch.optim.Optimizer",
        '%tune "train_step(" --model model': "not a Python expression",
        '%tune "train_step()" --model model --budget soon': "--budget",
        '%tune "train_step()" --model model --budget 0s': "--budget",
        '%tune "train_step()" --model model --only fast': "not a fix",
        '%tune "train_step()" --model model --loader x': "not a torch.utils.data.DataLoader",
        '%tune "drawing_step()" --model model --batches data': "not an iterator",
        '%tune "train_step()" --model model --batches it --loader data': "does not draw from it",
        '%tune "drawing_step()" --model model --batch x': "batch size",
        '%tune "drawing_step()" --model model --optimizer opt': "--batches",
    }
    for line, expected in cases.items():
        message = shell.usage_error(line)
        assert expected in message, (line, message)
    assert names() == before
    assert shell["it"] is iterator
    assert iterator._num_yielded == 0  # nothing drew from the user's iterator
