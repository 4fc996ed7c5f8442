"""On a real NVIDIA GPU: ``%tune``'s CUDA fixes, figures and suggestions.

Run on the GPU machine (about 6 minutes on an H200, most of it compiling; within one 10-minute
call, run it in two: ``-k precision``, then ``-k "convolution or launch"``):

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
  both tried, each with its compile time apart;
- greedy trials: each fix timed on top of the fixes kept before it, the compile modes on top of
  the same kept fixes and never of each other, each fix's memory change what it adds (the kept
  parts' changes add up to the stack's).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.gpu.magic_shell import Shell, put_back_exactly  # noqa: E402  # after the path is set
from tests.helpers import train_step_cell  # noqa: E402

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


def test_precision_the_optimizer_a_larger_batch_compile_on_top_and_the_suggestions_on_cuda(
    shell: Shell,
) -> None:
    shell.run("%amp tf32 off")  # strict fp32, so that TF32 is a fix to try
    shell.run(ATTENTION_STEP)
    defining_cell = shell.ip.execution_count - 1
    ran = shell.run(
        'r = %tune "train_step()" --model model --optimizer opt --batch batch '
        "--only precision,optimizer,batch,compile --budget 4m -o"
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
    # Greedy: TF32 against the step as it is; autocast on top of TF32 where it was kept; the
    # optimizer on top of both where kept.
    assert tf32.on_top_of == ()
    assert bf16.on_top_of == (("TF32 matmuls and convolutions",) if tf32.kept else ())
    assert fused.on_top_of == tuple(f.name for f in (tf32, bf16) if f.kept)
    # torch.compile on top of the kept precision fixes: its first call compiled the program the
    # rounds time (under autocast where autocast was kept), so its first steps, which run with
    # the kept fixes, found it compiled: no second compile there.
    assert "torch.compile" in tried, ran.text
    compiled = tried["torch.compile"]
    assert compiled.on_top_of == tuple(f.name for f in (tf32, bf16, fused) if f.kept)
    took = re.search(r"the first compiled step took ([\d.]+) (s|ms)", " ".join(compiled.notes))
    assert took is not None, compiled.notes
    compile_s = float(took.group(1)) * (1.0 if took.group(2) == "s" else 1e-3)
    assert compiled.first_step_s < compile_s / 5, (compiled.first_step_s, compile_s)
    # Memory: each kept fix's change is against the kept fixes' first steps (what it adds), so
    # the parts add up to the stack's change against the step as it is (the same programs,
    # the same first steps; a few MiB of the allocator's rounding aside).
    assert result.stack is not None, ran.text  # TF32 at least: faster, the loss within 2 %
    stacked = [tried[name] for name in result.stack.names]
    total = sum(f.memory_delta_bytes for f in stacked)
    assert result.stack.memory_delta_bytes is not None, result.stack.error
    assert abs(total - result.stack.memory_delta_bytes) <= 16 * 2**20, (
        [(f.name, f.memory_delta_bytes) for f in stacked],
        result.stack.memory_delta_bytes,
    )
    larger = next(f for f in result.fixes if f.family == "batch")
    assert larger.name.endswith("(from 8), per sample")
    assert larger.memory_delta_bytes is not None
    assert larger.memory_delta_bytes > 0
    assert shell["batch"] == 8
    # MFU against the data-sheet peak of the dtype the matmuls run in (the H200 is in it).
    assert result.profile.flops_per_step > 0
    assert result.profile.mfu_before.fraction is not None, ran.text
    # The trials came after %tune's profile, in a kernel that did not set TEARDOWN_CUPTI: the
    # method says CUPTI stayed attached (docs/magics.md, "What a profile leaves in the kernel").
    assert "keeps CUPTI attached" in ran.text, ran.text
    # The suggestions: the attention's line in Block.forward, the sync's line in the cell.
    names = {s.name: s for s in result.suggestions}
    assert "torch.softmax(scores" in names["scaled_dot_product_attention"].where
    syncs = names["no host syncs"]
    assert f"cell [{defining_cell}]" in syncs.where, ran.text
    assert put_back_exactly(result.restored), result.restored.line


CNN_STEP = (
    """
model = torch.nn.Sequential(
    torch.nn.Conv2d(64, 128, 3, padding=1), torch.nn.ReLU(),
    torch.nn.Conv2d(128, 128, 3, padding=1), torch.nn.ReLU(),
    torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(128, 10),
).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(64, 64, 56, 56, device="cuda")
y = torch.randint(0, 10, (64,), device="cuda")

"""
    + train_step_cell(
        "torch.nn.functional.cross_entropy(model(x), y)", zero_grad="set_to_none=True"
    )
    + """
train_step()
"""
)


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
LAUNCH_BOUND_STEP = (
    """
model = torch.nn.Sequential(*[torch.nn.Linear(32, 32) for _ in range(24)]).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(4, 32, device="cuda")

"""
    + train_step_cell("model(x).square().mean()", zero_grad="set_to_none=True")
    + """
train_step()
"""
)


def test_compile_and_reduce_overhead_on_a_launch_bound_step(shell: Shell) -> None:
    shell.run(LAUNCH_BOUND_STEP)
    ran = shell.run(
        'r = %tune "train_step()" --model model --optimizer opt --only compile,optimizer '
        "--budget 4m -o"
    )
    result = shell["r"]
    assert result.profile.gpu_idle_fraction >= 0.3, ran.text
    tried = {f.name: f for f in result.fixes}
    assert {"torch.compile", "torch.compile reduce-overhead"} <= set(tried), ran.text
    # Both modes on top of the kept optimizer (where it was kept), neither on top of the other.
    below = ("fused optimizer",) if tried["fused optimizer"].kept else ()
    for name in ("torch.compile", "torch.compile reduce-overhead"):
        assert tried[name].on_top_of == below, (name, tried[name].on_top_of)
        notes = " ".join(tried[name].notes)
        assert "compile time, apart from the steady gain" in notes
        assert "(a first step without it: " in notes
    if result.stack is not None and len(result.stack.names) > 1:
        assert result.stack.names[-1].startswith("torch.compile")  # one mode, last
        assert sum(n.startswith("torch.compile") for n in result.stack.names) == 1
    assert shell["model"].__class__.__name__ == "Sequential"  # the eager model is back
    assert put_back_exactly(result.restored), result.restored.line
