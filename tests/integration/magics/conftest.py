"""A fresh, real IPython shell per test with ``%load_ext jupyter_gpu``, CUDA hidden on purpose.

These tests check the magics' CPU branch (CPU autocast, "No CUDA GPU", the UsageErrors a
CPU-only machine gets), so the ``shell`` fixture hides the GPU even where there is one:
``torch.cuda.is_available()`` is False and ``device_count()`` 0 for the test (what
``CUDA_VISIBLE_DEVICES=`` gives a fresh process; this process may have CUDA up already), and
NVML fails to load, as without a driver ("No GPU:" from ``%gpu``). The CUDA
branch is tested where CUDA exists: tests marked ``cuda_visible`` keep it (skipped without one),
and ``tests/gpu/``.
"""

from __future__ import annotations

import atexit
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import CapturedIO, capture_output
from traitlets.config import Config

from tests.helpers import train_step_cell


@dataclass
class Ran:
    """One cell run: IPython's result and what it printed and displayed."""

    result: Any
    captured: CapturedIO

    @property
    def error(self) -> BaseException | None:
        return self.result.error_before_exec or self.result.error_in_exec

    @property
    def text(self) -> str:
        """stdout, stderr and every display's text/plain, in one string."""
        parts = [self.captured.stdout, self.captured.stderr]
        parts += [o.data.get("text/plain", "") for o in self.captured.outputs]
        return "\n".join(parts)

    def bundles(self, mimetype: str) -> list[Any]:
        return [o.data[mimetype] for o in self.captured.outputs if mimetype in o.data]


class Shell:
    """A thin helper around a real ``InteractiveShell``."""

    def __init__(self, ip: InteractiveShell) -> None:
        self.ip = ip

    def run(self, source: str) -> Ran:
        with capture_output() as captured:
            result = self.ip.run_cell(source, store_history=True)
        return Ran(result, captured)

    def ok(self, source: str) -> Ran:
        ran = self.run(source)
        assert ran.error is None, f"{source!r} failed: {ran.error!r}\n{ran.text}"
        return ran

    def usage_error(self, source: str) -> str:
        """Run ``source``, check it raised UsageError, return the message."""
        from IPython.core.error import UsageError

        ran = self.run(source)
        assert isinstance(ran.error, UsageError), f"{source!r}: {ran.error!r}\n{ran.text}"
        return str(ran.error)

    def names(self) -> dict[str, Any]:
        """The notebook's names and what each holds (IPython's own ``_``-names and In/Out left
        out: every cell run changes them). The objects, not their ids: an id is reused once its
        object is freed, so a name rebound to a new object could pass for unchanged."""
        ns = self.ip.user_ns
        return {k: v for k, v in ns.items() if not k.startswith("_") and k not in ("In", "Out")}

    def refuses(self, phrases: Mapping[str, str]) -> None:
        """Each source in ``phrases`` raises UsageError saying its phrase, and leaves every
        name of the notebook bound to what it held before."""
        for source, phrase in phrases.items():
            before = self.names()
            message = self.usage_error(source)
            assert phrase in message, (source, message)
            after = self.names()
            changed = sorted(
                k for k in before.keys() | after.keys() if after.get(k) is not before.get(k)
            )
            assert not changed, f"{source!r} changed the notebook's names {changed}"

    def mid_training(self, cell: str) -> None:
        """Run ``cell`` and two of its ``train_step()``: the optimizer's state and the gradients
        exist, as in a notebook mid-training (all that a magic running the step must put back)."""
        self.ok(cell)
        self.ok("train_step(); train_step()")

    def __getitem__(self, name: str) -> Any:
        return self.ip.user_ns[name]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "cuda_visible: the shell keeps CUDA (skipped where torch sees no GPU)"
    )


def hide_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make this process look GPU-less to the magics for one test: torch sees no CUDA, and
    NVML's library is not found (what ``%gpu`` meets on a machine without an NVIDIA driver)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setitem(sys.modules, "pynvml", _nvml_without_driver())


def _nvml_without_driver() -> Any:
    """The fake NVML, its ``nvmlInit`` failing as the real one does without a driver."""
    import pynvml

    from tests.fakes.fake_nvml import FakeNvml

    fake = FakeNvml(devices=0)
    fake.fail("nvmlInit", pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    return fake


@pytest.fixture
def shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Shell]:
    if request.node.get_closest_marker("cuda_visible") is None:
        hide_cuda(monkeypatch)
    else:
        import torch

        if not torch.cuda.is_available():
            pytest.skip("needs CUDA (the CUDA branch of the magic)")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    InteractiveShell.clear_instance()
    ip = InteractiveShell.instance(config=config)
    ip.run_line_magic("load_ext", "jupyter_gpu")
    helper = Shell(ip)
    helper.ok("import torch\ntorch.manual_seed(0)")
    yield helper
    if "jupyter_gpu" in ip.extension_manager.loaded:
        ip.run_line_magic("unload_ext", "jupyter_gpu")
    # No torch._dynamo.reset() here: each test defines its own classes and functions, so no
    # compiled code is shared. IPython's exit hook would clear this shell's namespace at exit,
    # under dynamo's feet (it then prints KeyErrors from its weakref callbacks): skip it.
    atexit.unregister(ip.atexit_operations)
    InteractiveShell.clear_instance()


def training_bits(shell: Shell, model: str = "model", opt: str = "opt") -> dict[str, Any]:
    """The bits of all a training step changes: weights, gradients, the optimizer, the RNG.

    Bytes, not values (NaN equals NaN, -0.0 differs from 0.0); the param groups as values.
    """
    import torch

    m = shell[model]
    m = getattr(m, "_orig_mod", m)  # a compiled model's eager one
    out: dict[str, Any] = {
        f"w.{k}": v.detach().numpy().tobytes() for k, v in m.state_dict().items()
    }
    for i, p in enumerate(m.parameters()):
        if p.grad is not None:
            out[f"g.{i}"] = p.grad.numpy().tobytes()
    state = shell[opt].state_dict()
    for i, per_param in state["state"].items():
        out |= {f"o.{i}.{k}": v.numpy().tobytes() for k, v in per_param.items()}
    out["groups"] = [dict(g, params=None) for g in state["param_groups"]]
    out["rng"] = torch.get_rng_state().numpy().tobytes()
    return out


# A class defined in the test's own cell: dynamo caches compiled code per code object, so each
# test gets a fresh one (an nn.Sequential would share its forward across tests). A cell that
# trains it another way starts with NET_CELL.
NET_CELL = """
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, t):
        return self.fc2(torch.relu(self.fc1(t)))
"""
MODEL_CELL = (
    NET_CELL
    + """
model = Net()
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
x = torch.randn(8, 16)
y = torch.randn(8, 4)

"""
    + train_step_cell("torch.nn.functional.mse_loss(model(x), y)")
)
