"""On a real NVIDIA GPU: the magics explain what they measured, and no raw warning shows.

Each test runs cells in a real IPython shell with ``%load_ext jupyter_gpu`` and asserts on what
the magic returned and printed. Every cell's output goes to ``$JUPYTER_GPU_OUT/
magics_explain_gpu.log`` when that is set. Run on the GPU machine:

    python3 -m pytest -m gpu tests/gpu/test_magics_explain_gpu.py -x -q

Checks (issue 12):

- ``%%profile`` on a training step: the top row by self GPU time is a real kernel, not an
  annotation (``Optimizer.step#AdamW.step`` is a range) nor the profiler's bookkeeping;
- a loop with an explicit ``torch.cuda.synchronize()`` each step: exactly that many syncs, all
  placed at that line; ``.item()`` on CUDA tensors counts, on CPU tensors it does not;
- the GPU's idle time split (host, between kernels, copies) adds up and the hint names the
  largest share;
- ``%compile --bench`` where CUDA graphs are skipped: the output names torch's reason;
- ``%amp compare`` on a model whose training state fills 60 % of the GPU: no OOM, the saved
  state kept on the CPU, said so;
- no raw warning (``UserWarning``, dynamo's ``W`` log lines) in any output.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.gpu.magic_shell import Shell  # noqa: E402  # after the path is set
from tests.helpers import train_step_cell  # noqa: E402

pytestmark = pytest.mark.gpu


TRAIN = (
    """
import torch.nn as nn
model = nn.Sequential(*[nn.Sequential(nn.Linear(1024, 1024), nn.GELU()) for _ in range(8)]).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(256, 1024, device="cuda")

"""
    + train_step_cell("model(x).square().mean()", zero_grad="set_to_none=True")
    + """
for _ in range(3):
    train_step()
torch.cuda.synchronize()
"""
)


def test_profile_top_row_is_a_kernel_and_annotations_are_ranges(shell: Shell) -> None:
    shell.run(TRAIN)
    ran = shell.run("r = %profile -o --row-limit 10 [train_step() for _ in range(3)]")
    r = shell["r"]
    from torch._C._autograd import DeviceType

    kernels = {
        e.name
        for e in r.profiler.events()
        if e.device_type == DeviceType.CUDA and not e.is_user_annotation
    }
    top = max((row for row in r.rows if row.on_gpu), key=lambda row: row.self_gpu_s)
    assert top.name in kernels, f"top row {top.name!r} is not a kernel"
    assert top.self_gpu_s > 0
    lines = ran.text.splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith("top "))
    assert "GPU kernels and copies" in lines[title]
    first_row = lines[title + 2]  # after the header line
    assert first_row.startswith(top.name[:60]), (first_row, top.name)
    names = {row.name for row in r.rows}
    # The profiler's own word for what a user annotation is (not a '#' in the name: C++ kernel
    # names such as "{lambda()#2}" have one too).
    annotations = {e.name for e in r.profiler.events() if e.is_user_annotation}
    assert "Optimizer.step#AdamW.step" in annotations
    annotated = [
        (row.name[:80], row.on_gpu, row.self_gpu_s) for row in r.rows if row.name in annotations
    ]
    assert not annotated, f"an annotation among the ops: {annotated}"
    assert "Activity Buffer Request" not in names
    ranges = {rng.name: rng for rng in r.ranges}
    assert "Optimizer.step#AdamW.step" in ranges
    assert ranges["Optimizer.step#AdamW.step"].calls == 3
    assert r.kernel_count > 0
    assert r.sync_count == 0  # a training step that never reads a value back


SYNC_LOOP = """%%profile -o -q
for _ in range(25):
    y = x @ x
    torch.cuda.synchronize()
"""


def test_explicit_synchronize_is_counted_exactly_with_its_line(shell: Shell) -> None:
    shell.run("x = torch.randn(2048, 2048, device='cuda')\n(x @ x).sum().item()")
    ran = shell.run(SYNC_LOOP)
    r = ran.result
    assert r.sync_count == 25, r.sync_places
    # The cell's own numbers, as the notebook shows them: In [N], line 4 under "%%profile".
    assert r.sync_places == {f"cell [{ran.execution_count}] line 4": 25}
    # found by the sync pass, a run of its own after the profiled one, put back
    assert r.sync_pass is not None
    assert r.sync_pass.exact, r.sync_pass.line
    assert r.sync_blocked_s > 0


def test_sync_debug_mode_is_never_on_while_the_profiler_records(
    shell: Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    seen: list[tuple[object, bool]] = []
    real = torch.cuda.set_sync_debug_mode

    def spy(mode: object) -> None:
        seen.append((mode, torch.autograd._profiler_enabled()))  # type: ignore[attr-defined]
        real(mode)  # type: ignore[arg-type]  # whatever the magic passes, torch checks

    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", spy)
    shell.run("x = torch.randn(512, 512, device='cuda')\n(x @ x).sum().item()")
    for line in ("--steps 3", "--warmup 1 --steps 2", ""):
        seen.clear()
        ran = shell.run(f"%%profile -o -q {line}\ny = x @ x\nv = y.sum().item()")
        r = ran.result
        assert seen, line  # the sync pass switched the mode on (and back)
        assert not any(profiling for _, profiling in seen), (line, seen)
        assert r.sync_count == r.steps, (line, r.sync_count)  # one .item() a step
        assert r.sync_places == {f"cell [{ran.execution_count}] line 3": 1}, r.sync_places


def test_item_on_cuda_is_a_sync_and_on_cpu_it_is_not(shell: Shell) -> None:
    shell.run("g = torch.randn(64, device='cuda')\nc = torch.randn(64)")
    r = shell.run(
        "%%profile -o -q\ntotal = 0.0\nfor _ in range(10):\n    total += g.sum().item()\n"
        "for _ in range(50):\n    total += c.sum().item()"
    ).result
    assert r.sync_count == 10, (r.sync_count, r.sync_places)
    assert sum(r.sync_places.values()) == 10
    assert all(place.endswith("line 4") for place in r.sync_places), r.sync_places


def test_idle_split_adds_up_and_the_hint_names_the_largest_share(shell: Shell) -> None:
    shell.run(
        "import torch.nn as nn\n"
        "tiny = nn.Sequential(*[nn.Linear(64, 64) for _ in range(12)]).cuda()\n"
        "t = torch.randn(32, 64, device='cuda')\n"
        "for _ in range(5):\n    tiny(t)\ntorch.cuda.synchronize()"
    )
    ran = shell.run("%%profile -o\nfor _ in range(200):\n    out = tiny(t)")
    r = ran.result
    from jupyter_gpu.magics.profile.idle import IDLE_LABELS

    total_idle = sum(r.idle_s.values())
    assert r.gpu_idle_fraction is not None
    assert r.gpu_idle_fraction > 0.3  # tiny kernels: the GPU waits
    largest = max(r.idle_s, key=r.idle_s.get)
    assert total_idle > 0
    assert r.hints, "no hint for a GPU idle most of the time"
    assert IDLE_LABELS[largest] in r.hints[0] or (
        largest == "host" and "Launch-bound" in r.hints[0]
    ), (r.idle_s, r.hints)
    assert IDLE_LABELS[largest] in ran.text


GRAPH_SKIP = """
w = torch.randn(512, 512, device="cuda") / 23

def step(inp, acc):
    out = (inp @ w).relu()
    acc.add_(out.mean(0))  # mutates an input: CUDA graphs are skipped ("mutated inputs")
    return out

inp = torch.randn(64, 512, device="cuda")
acc = torch.zeros(512, device="cuda")
"""


def test_compile_bench_names_why_cuda_graphs_were_skipped(shell: Shell) -> None:
    shell.run(GRAPH_SKIP)
    ran = shell.run('r = %compile step --mode reduce-overhead --bench "step(inp, acc)" -o')
    r = shell["r"]
    text = ran.text
    assert "CUDA graphs" in text, text
    assert "skipped" in text
    reasons = [
        line.split("CUDA graphs skipped:", 1)[1].strip()
        for line in text.splitlines()
        if "CUDA graphs skipped:" in line
    ]
    assert reasons, text
    assert all(len(reason) > 5 for reason in reasons), reasons  # torch's own words follow
    shell.log.append(f"torch's reason: {reasons[0]}")  # expected: mutated inputs (1 instances)
    assert r.bench is not None
    assert r.explanations, "no explanation attached to the result"


def test_amp_compare_on_a_model_that_fills_60_percent_of_the_gpu(shell: Shell) -> None:
    import torch

    _free, total = torch.cuda.mem_get_info()
    # fp32 weights, gradients and AdamW's two moments: 16 bytes a parameter, 48 % of the GPU;
    # a step's temporaries (AdamW's, autocast's weight copies) take it to about 60 %. A second
    # copy of that state beside it, as %amp compare kept before, does not fit.
    width = 8192
    layers = max(1, int(0.48 * total / 16) // (width * width))
    shell.run(
        "import torch.nn as nn\n"
        f"big = nn.Sequential(*[nn.Linear({width}, {width}, bias=False) for _ in range({layers})])"
        ".cuda()\n"
        "bopt = torch.optim.AdamW(big.parameters(), lr=1e-4)\n"
        f"bx = torch.randn(8, {width}, device='cuda')\n"
        "def big_step():\n"
        "    bopt.zero_grad(set_to_none=False)\n"
        "    loss = big(bx).float().square().mean()\n"
        "    loss.backward()\n"
        "    bopt.step()\n"
        "    return loss\n"
        "big_step(); torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()\n"
        "big_step(); torch.cuda.synchronize()"
    )
    peak = torch.cuda.max_memory_allocated() / total
    shell.log.append(f"model: {layers} layers of {width}x{width}; step peak {peak:.0%} of the GPU")
    assert peak > 0.55, f"the training step fills {peak:.0%} of the GPU, not 60 %"
    ran = shell.run('cmp = %amp compare "big_step()" --model big --optimizer bopt --runs 2 -o')
    cmp = shell["cmp"]
    assert all(m.error is None for m in cmp.results), [m.error for m in cmp.results]
    assert cmp.state_on == "cpu"
    assert "host memory" in ran.text  # it said where it kept the saved state, and why
    assert "OutOfMemory" not in ran.text
