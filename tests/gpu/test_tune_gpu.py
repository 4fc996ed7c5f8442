"""On a real NVIDIA GPU: ``%tune``'s CUDA fixes, figures and suggestions.

Run on the GPU machine (about 4 minutes on an H200, most of it compiling):

    python3 -m pytest -m gpu tests/gpu/test_tune_gpu.py -q -s

Writes ``$JUPYTER_GPU_OUT/tune_gpu.log`` (every cell and its output) when that is set. Checks
what the CPU tests cannot:

- a fp32 step of matmuls with attention written by hand and a ``.item()`` every step: TF32 is
  tried and measurably faster, bf16 autocast is tried with its first step's peak memory
  change, the fused optimizer with the loss after one update within tolerance, a larger batch
  (``--batch``) from the free memory, per sample; MFU is shown against the data-sheet peak; the
  suggestions name the hand-written attention's line and the ``.item()`` sync line; everything
  is put back bit for bit;
- a small CNN: channels_last and cudnn.benchmark are tried;
- a launch-bound step (many tiny kernels): torch.compile's default mode and reduce-overhead are
  both tried, each with its compile time apart.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.gpu.magic_shell import Shell, put_back_exactly  # noqa: E402  # after the path is set

pytestmark = pytest.mark.gpu


# Attention written out by hand (a softmax between two batched matmuls), fp32, the default
# AdamW (foreach on CUDA), and the loss read with .item() every step: a sync on its own line.
ATTENTION_STEP = """
import math

class Block(torch.nn.Module):
    def __init__(self, d=1024, heads=16):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.out = torch.nn.Linear(d, d)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d)
        )

    def forward(self, t):
        b, n, d = t.shape
        q, k, v = self.qkv(t).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        t = t + self.out((torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, n, d))
        return t + self.mlp(t)

model = torch.nn.Sequential(*[Block() for _ in range(4)]).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
batch = 8
data = torch.randn(64, 256, 1024, device="cuda")
losses = []

def train_step():
    x = data[:batch]
    opt.zero_grad(set_to_none=True)
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    losses.append(loss.item())  # the progress line: the host waits for the GPU here
    return loss

train_step()
"""


def test_precision_the_optimizer_a_larger_batch_and_the_suggestions_on_cuda(
    shell: Shell,
) -> None:
    shell.run("%amp tf32 off")  # strict fp32, so that TF32 is a fix to try
    shell.run(ATTENTION_STEP)
    defining_cell = shell.ip.execution_count - 1
    ran = shell.run(
        'r = %tune "train_step()" --model model --optimizer opt --batch batch '
        "--only precision,optimizer,batch --budget 3m -o"
    )
    result = shell["r"]
    tried = {f.name: f for f in result.fixes}
    tf32 = tried["TF32 matmuls and convolutions"]
    assert tf32.ratio.faster, ran.text  # fp32 matmuls on the tensor cores
    bf16 = tried["bf16 autocast"]
    assert bf16.memory_delta_bytes is not None  # the allocator's peak, measured on CUDA
    fused = tried["fused optimizer"]
    assert fused.loss_delta is not None
    assert "tolerance" not in fused.verdict  # the same update, fused: within 2 %
    larger = next(f for f in result.fixes if f.family == "batch")
    assert larger.name.endswith("(from 8), per sample")
    assert larger.memory_delta_bytes is not None
    assert larger.memory_delta_bytes > 0
    assert shell["batch"] == 8
    # MFU against the data-sheet peak of the dtype the matmuls run in (the H200 is in it).
    assert result.profile.flops_per_step > 0
    assert result.profile.mfu_before.fraction is not None, ran.text
    # The suggestions: the attention's line in Block.forward, the sync's line in the cell.
    names = {s.name: s for s in result.suggestions}
    assert "torch.softmax(scores" in names["scaled_dot_product_attention"].where
    syncs = names["no host syncs"]
    assert f"cell [{defining_cell}]" in syncs.where, ran.text
    assert put_back_exactly(result.restored), result.restored.line


CNN_STEP = """
model = torch.nn.Sequential(
    torch.nn.Conv2d(64, 128, 3, padding=1), torch.nn.ReLU(),
    torch.nn.Conv2d(128, 128, 3, padding=1), torch.nn.ReLU(),
    torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(128, 10),
).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(64, 64, 56, 56, device="cuda")
y = torch.randint(0, 10, (64,), device="cuda")

def train_step():
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss

train_step()
"""


def test_the_convolution_fixes_are_tried_on_cuda(shell: Shell) -> None:
    shell.run(CNN_STEP)
    before = shell["model"][0].weight.stride()
    ran = shell.run(
        'r = %tune "train_step()" --model model --optimizer opt --only conv --budget 2m -o'
    )
    result = shell["r"]
    tried = {f.name for f in result.fixes}
    assert {"channels_last", "cudnn.benchmark"} <= tried, ran.text
    assert shell["model"][0].weight.stride() == before  # converted back
    import torch

    assert torch.backends.cudnn.benchmark is False  # put back
    assert put_back_exactly(result.restored), result.restored.line


# Many tiny kernels: the GPU waits on the host launching them (the launch-bound rule: idle 30 %
# or more, kernels under 20 µs on average).
LAUNCH_BOUND_STEP = """
model = torch.nn.Sequential(*[torch.nn.Linear(32, 32) for _ in range(24)]).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(4, 32, device="cuda")

def train_step():
    opt.zero_grad(set_to_none=True)
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    return loss

train_step()
"""


def test_compile_and_reduce_overhead_on_a_launch_bound_step(shell: Shell) -> None:
    shell.run(LAUNCH_BOUND_STEP)
    ran = shell.run(
        'r = %tune "train_step()" --model model --optimizer opt --only compile --budget 4m -o'
    )
    result = shell["r"]
    assert result.profile.gpu_idle_fraction >= 0.3, ran.text
    tried = {f.name: f for f in result.fixes}
    assert {"torch.compile", "torch.compile reduce-overhead"} <= set(tried), ran.text
    for fix in tried.values():
        assert any("compile time, apart from the steady gain" in n for n in fix.notes)
    assert shell["model"].__class__.__name__ == "Sequential"  # the eager model is back
    assert put_back_exactly(result.restored), result.restored.line
