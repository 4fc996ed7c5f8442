"""On a real NVIDIA GPU: the measuring magics leave the notebook as it was, and say why, measured.

Run on the GPU machine (about 2 minutes on an H200, most of it torch.compile):

    python3 -m pytest -m gpu tests/gpu/test_measure_gpu.py -q -s

Writes ``$JUPYTER_GPU_OUT/measure_gpu.json`` (the figures and every "Why:" line) and
``measure_gpu.log`` (every cell and its output) when that is set. Checks:

- ``%%memsummary`` leaves ``torch.cuda.max_memory_allocated()`` as it would have been without
  the magic: exactly the earlier peak when the cell stays below it (and the cell's own peak,
  from the allocator's trace, equals an independent measurement), the cell's peak when it
  goes above; with ``--snapshot`` too;
- ``%compile --bench "train_step()" --optimizer opt`` on a CUDA model with AdamW: weights,
  gradients, AdamW's state, the CPU and CUDA RNG bit for bit as before, and the peak counter
  as it was;
- the "Why" lines of ``%compile --bench`` for a tiny elementwise function, a float32 matmul
  MLP (TF32 off) and a bfloat16 one, and of ``%amp compare`` on a small training step: each
  names only what was measured (the tiny one never TF32 nor matmuls; bf16 never TF32).
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
from tests.helpers import train_step_cell  # noqa: E402

pytestmark = pytest.mark.gpu

MIB = 1024**2


def why(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("Why: ")]


def test_memsummary_leaves_the_peak_counter_as_it_would_have_been(
    shell: Shell, figures: dict[str, Any]
) -> None:
    import torch

    shell.run(
        "torch.cuda.init()\n"
        "torch.cuda.reset_peak_memory_stats()  # the test's own baseline, not the magic's\n"
        "big = torch.empty(2 * 1024**3, dtype=torch.uint8, device='cuda')\n"
        "del big  # an earlier peak, 2 GiB above what stays allocated\n"
        "torch.cuda.synchronize()"
    )
    earlier = torch.cuda.max_memory_allocated()
    cell = (
        "tmp = torch.ones(16 * 1024**2, device='cuda')  # 64 MiB\n"
        "sq = tmp * 2  # 64 MiB more\n"
        "del tmp, sq\n"
        "torch.cuda.synchronize()"
    )
    r = shell.run("%%memsummary -o\n" + cell).result
    after = torch.cuda.max_memory_allocated()
    figures["memsummary_below"] = {
        "earlier_peak": earlier,
        "after": after,
        "source": r.peak.source,
        "above_start": r.peak_above_start_bytes,
    }
    assert after == earlier  # as it would have been without the magic, to the byte
    assert r.peak.source == "trace"
    assert r.peak_above_start_bytes == 128 * MIB  # the requested bytes, exactly
    # The same cell measured independently: the test resets the counter itself.
    stats = torch.cuda.memory_stats()
    torch.cuda.reset_peak_memory_stats()
    shell.run(cell)
    peak = torch.cuda.memory_stats()
    independent = peak["requested_bytes.all.peak"] - stats["requested_bytes.all.current"]
    figures["memsummary_below"]["independent_requested_above_start"] = independent
    assert r.peak_above_start_bytes == independent

    # A cell that goes above the earlier peak: the counter is its peak, as without the magic.
    r = shell.run(
        "%%memsummary -o\nhuge = torch.empty(3 * 1024**3, dtype=torch.uint8, device='cuda')\n"
        "del huge"
    ).result
    figures["memsummary_above"] = {"source": r.peak.source, "peak": r.peak_bytes}
    assert r.peak.source == "counter"
    assert r.peak_bytes == torch.cuda.max_memory_allocated()

    shell.run(
        "big = torch.empty(4 * 1024**3, dtype=torch.uint8, device='cuda')\n"
        "del big\ntorch.cuda.synchronize()"
    )
    earlier = torch.cuda.max_memory_allocated()
    r = shell.run("%%memsummary --snapshot -o\n" + cell).result
    figures["memsummary_snapshot"] = {
        "earlier_peak": earlier,
        "after": torch.cuda.max_memory_allocated(),
        "source": r.peak.source,
        "above_start": r.peak_above_start_bytes,
        "timeline_events": r.timeline.events if r.timeline else None,
    }
    assert torch.cuda.max_memory_allocated() == earlier
    assert r.peak_above_start_bytes == 128 * MIB
    assert r.timeline is not None

    # What the trace costs a cell: the same cell below the earlier peak (trace recorded) and
    # with the counter at the memory in use (no trace needed).
    import time

    def wall(source: str) -> float:
        start = time.perf_counter()
        shell.run(source)
        return time.perf_counter() - start

    traced = min(wall("%%memsummary -q\n" + cell) for _ in range(5))
    untraced = []
    for _ in range(5):
        torch.cuda.reset_peak_memory_stats()  # the test's own: then the counter alone tells
        untraced.append(wall("%%memsummary -q\n" + cell))
    bare = min(wall(cell) for _ in range(5))
    untraced_s = min(untraced)
    figures["memsummary_cost_s"] = {"traced": traced, "counter_only": untraced_s, "bare": bare}


TRAIN = (
    """
import torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(1024, 1024), nn.GELU())]).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(256, 1024, device="cuda")
y = torch.randn(256, 1024, device="cuda")

"""
    + train_step_cell("(model(x) - y).square().mean()", zero_grad="set_to_none=False")
    + """
for _ in range(3):
    train_step()
# an earlier peak far above the bench's, so that "as it was" is a real test
big = torch.empty(8 * 1024**3, dtype=torch.uint8, device="cuda")
del big
torch.cuda.synchronize()
"""
)


def _bits(shell: Shell) -> dict[str, bytes]:
    import torch

    model, opt = shell["model"], shell["opt"]
    model = getattr(model, "_orig_mod", model)
    out = {f"w.{k}": v.detach().cpu().numpy().tobytes() for k, v in model.state_dict().items()}
    for i, p in enumerate(model.parameters()):
        out[f"g.{i}"] = p.grad.cpu().numpy().tobytes()
    for i, state in opt.state_dict()["state"].items():
        out |= {f"o.{i}.{k}": v.cpu().numpy().tobytes() for k, v in state.items()}
    out["rng.cpu"] = torch.get_rng_state().numpy().tobytes()
    out["rng.cuda"] = torch.cuda.get_rng_state().numpy().tobytes()
    return out


def test_compile_bench_leaves_a_cuda_model_and_adamw_as_they_were(
    shell: Shell, figures: dict[str, Any]
) -> None:
    import torch

    shell.run(TRAIN)
    before = _bits(shell)
    peak = torch.cuda.max_memory_allocated()
    ran = shell.run('r = %compile model --bench "train_step()" --optimizer opt -o')
    r = shell["r"]
    figures["bench_train_step"] = {
        "speedup": r.bench.speedup,
        "runs": r.bench.restored.runs,
        "restored": r.bench.restored.line,
        "peak_before": peak,
        "peak_after": torch.cuda.max_memory_allocated(),
        "why": why(ran.text),
    }
    assert put_back_exactly(r.bench.restored), r.bench.restored.line
    assert _bits(shell) == before  # weights, gradients, AdamW, both RNGs: bit for bit
    assert torch.cuda.max_memory_allocated() == peak
    assert "checked bit for bit: model, opt" in ran.text


CASES = """
import torch.nn as nn

def tiny(a):
    return a + 1

t = torch.randn(8, device="cuda")
torch.manual_seed(0)
mlp32 = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(4096, 4096), nn.ReLU())]).cuda()
mlp16 = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(4096, 4096), nn.ReLU())]).cuda()
xb = torch.randn(2048, 4096, device="cuda")

def fp32_step():
    with torch.no_grad():
        return mlp32(xb)

def bf16_step():
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        return mlp16(xb)
"""


def test_why_lines_name_only_what_was_measured(shell: Shell, figures: dict[str, Any]) -> None:
    shell.run(CASES)
    shell.run("%amp tf32 off")
    found: dict[str, Any] = {}
    for name, expr in (("tiny", "tiny(t)"), ("mlp32", "fp32_step()"), ("mlp16", "bf16_step()")):
        ran = shell.run(f'r_{name} = %compile {name} --bench "{expr}" -o')
        r = shell[f"r_{name}"]
        found[name] = {
            "speedup": round(r.bench.speedup, 3),
            "eager_s": r.bench.eager_s,
            "compiled_s": r.bench.compiled_s,
            "kinds": [e.kind for e in r.explanations],
            "why": why(ran.text),
        }
        print(f"{name}: {r.bench.speedup:.2f}x", *why(ran.text), sep="\n  ")
    figures["why"] = found
    tiny = found["tiny"]
    assert tiny["speedup"] < 1.1  # the compiled call's own cost, against µs of work
    assert set(tiny["kinds"]) <= {"launch_bound", "none"}, tiny
    assert not any("TF32" in w or "atmul" in w for w in tiny["why"]), tiny["why"]
    assert any("µs" in w for w in tiny["why"])
    if found["mlp32"]["speedup"] < 1.1:  # float32 matmuls with TF32 off: the cause
        assert "tf32" in found["mlp32"]["kinds"], found["mlp32"]
    assert "tf32" not in found["mlp16"]["kinds"], found["mlp16"]


SMALL_TRAIN = """
import torch.nn as nn
torch.manual_seed(0)
small = nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(256, 256), nn.ReLU())]).cuda()
sopt = torch.optim.AdamW(small.parameters(), lr=1e-3)
sx = torch.randn(64, 256, device="cuda")

def small_step():
    sopt.zero_grad()
    loss = small(sx).square().mean()
    loss.backward()
    sopt.step()
    return loss

small_step()
big = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")  # an earlier, higher peak
del big
torch.cuda.synchronize()
"""


def test_amp_compare_says_why_bf16_is_no_faster_from_its_profiles(
    shell: Shell, figures: dict[str, Any]
) -> None:
    shell.run(SMALL_TRAIN)
    ran = shell.run('cmp = %amp compare "small_step()" --model small --optimizer sopt --runs 10 -o')
    cmp = shell["cmp"]
    times = {m.mode: m.time_s for m in cmp.results}
    figures["amp_small_step"] = {
        "times": times,
        "peaks": {m.mode: m.peak_bytes for m in cmp.results},
        "kinds": [e.kind for e in cmp.explanations],
        "why": why(ran.text),
        "restored": cmp.restore.line if cmp.restore else None,
    }
    print(*why(ran.text), sep="\n")
    assert cmp.restore is not None
    assert cmp.restore.exact, cmp.restore.line
    best_full = min(times["fp32"], times["tf32"])
    best_half = min(times["bf16"], times["fp16"])
    if best_full / best_half < 1.1:
        assert why(ran.text)  # a cause, or "no cause found" with the figures
        assert "TF32" not in " ".join(why(ran.text))
