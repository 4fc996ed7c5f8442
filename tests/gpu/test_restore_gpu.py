"""On a real NVIDIA GPU: the measuring magics put back a real training step's whole state.

Run on the GPU machine (about 2 minutes on an H200, most of it compiling ResNet-50):

    python3 -m pytest -m gpu tests/gpu/test_restore_gpu.py -q -s

Writes ``$JUPYTER_GPU_OUT/restore_gpu.json`` (each report's "Restored" line and its parts) and
``restore_gpu.log`` (every cell and its output) when that is set. Checks, as the issue saw them:

- torchvision's ResNet-50 (channels_last, fp16 autocast) with SGD + momentum, a OneCycleLR and a
  GradScaler on CUDA, through ``%compile --bench`` (inductor) and ``%amp compare``: no refusal;
  afterwards the weights, BatchNorm's buffers, the momentum buffers, the scheduler's
  ``last_epoch`` and learning rate and the scaler's scale are as before, bit for bit (a small
  CNN with BatchNorm stands in where torchvision is not installed; the JSON says which ran);
- one optimizer over two models, ``--model`` naming one: ``%amp compare``'s fp32 loss is the
  loss the next step gives (the issue saw -4.5 where the true one was 9.0), and every
  parameter the optimizer steps is back.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.gpu.magic_shell import Shell, put_back_exactly  # noqa: E402  # after the path is set

pytestmark = pytest.mark.gpu


RESNET = """
try:
    import torchvision
    model = torchvision.models.resnet50()
    which, batch, size = "torchvision resnet50", 64, 224
except ImportError:
    which, batch, size = "small CNN (no torchvision)", 64, 64
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 1000),
    )
model = model.cuda().to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.4, total_steps=100_000)
scaler = torch.amp.GradScaler("cuda", init_scale=1024.0)
# A step the scaler skips (an overflow) makes the scheduler warn that it stepped first: not
# what this test is about.
import warnings
warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
images = torch.randn(batch, 3, size, size, device="cuda").to(memory_format=torch.channels_last)
labels = torch.randint(0, 1000, (batch,), device="cuda")

def train_step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(model(images), labels)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    sched.step()
    return loss

for _ in range(3):
    train_step()
torch.cuda.synchronize()
"""


def _state(shell: Shell) -> dict[str, Any]:
    model = shell["model"]
    model = getattr(model, "_orig_mod", model)
    opt, sched, scaler = shell["opt"], shell["sched"], shell["scaler"]
    out: dict[str, Any] = {
        f"w.{k}": v.detach().cpu().numpy().tobytes() for k, v in model.state_dict().items()
    }
    for i, state in opt.state_dict()["state"].items():
        out |= {f"o.{i}.{k}": v.cpu().numpy().tobytes() for k, v in state.items()}
    out["groups"] = [dict(g, params=None) for g in opt.state_dict()["param_groups"]]
    out["last_epoch"] = sched.last_epoch
    out["last_lr"] = list(sched.get_last_lr())
    out["scale"] = scaler.get_scale()
    return out


def _record(figures: dict[str, Any], name: str, restored: Any, **extra: Any) -> None:
    figures[name] = {
        "line": restored.line,
        "exact": restored.exact,
        "changed": restored.changed,
        "parts": [(p.label, p.kind, p.compared, p.detail) for p in restored.parts],
        **extra,
    }


def test_resnet_with_a_scheduler_and_a_scaler_through_bench_and_compare(
    shell: Shell, figures: dict[str, Any]
) -> None:
    shell.run(RESNET)
    before = _state(shell)
    ran = shell.run('r = %compile model --bench "train_step()" --optimizer opt -o')
    restored = shell["r"].bench.restored
    _record(
        figures, "resnet_bench", restored, model=shell["which"], speedup=shell["r"].bench.speedup
    )
    assert _state(shell) == before, restored.line
    assert put_back_exactly(restored), restored.line
    assert "sched (state_dict)" in ran.text
    assert "scaler (state_dict)" in ran.text
    ran = shell.run('c = %amp compare "train_step()" --model model --optimizer opt --runs 5 -o')
    restore = shell["c"].restore
    _record(figures, "resnet_compare", restore, losses={m.mode: m.loss for m in shell["c"].results})
    assert _state(shell) == before, restore.line
    assert put_back_exactly(restore), restore.line
    fp32 = next(m for m in shell["c"].results if m.mode == "fp32")
    shell.run("after = train_step().item()")  # the step the notebook takes next
    assert fp32.loss == pytest.approx(shell["after"], rel=1e-3)


TWO_MODELS = """
torch.manual_seed(0)
enc = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.GELU()).cuda()
dec = torch.nn.Linear(512, 512).cuda()
opt = torch.optim.AdamW([*enc.parameters(), *dec.parameters()], lr=1e-2)
x = torch.randn(256, 512, device="cuda")
target = torch.randn(256, 512, device="cuda")

def pair_step():
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(dec(enc(x)), target)
    loss.backward()
    opt.step()
    return loss

pair_step()
torch.cuda.synchronize()
"""


def test_an_optimizer_over_two_models_is_put_back_and_fp32s_loss_is_the_true_one(
    shell: Shell,
    figures: dict[str, Any],
) -> None:
    import torch

    shell.run(TWO_MODELS)
    dec = {k: v.clone() for k, v in shell["dec"].state_dict().items()}
    shell.run('c = %amp compare "pair_step()" --model enc --optimizer opt --runs 5 -o')
    restore = shell["c"].restore
    # dec is stepped by the optimizer but named nowhere: back bit for bit all the same
    assert all(torch.equal(v, dec[k]) for k, v in shell["dec"].state_dict().items())
    fp32 = next(m for m in shell["c"].results if m.mode == "fp32")
    shell.run("true_loss = pair_step().item()")  # the step the notebook takes next
    _record(
        figures, "two_models_compare", restore, fp32_loss=fp32.loss, true_loss=shell["true_loss"]
    )
    assert restore.exact, restore.line
    assert "opt (and its 2 parameter(s) outside enc)" in restore.line
    assert fp32.loss == pytest.approx(shell["true_loss"], rel=1e-4)
