"""What saving, putting back and checking a training step's state costs, beside the step itself.

The measuring magics (``%compile --bench``, ``%amp compare``, ``%%profile --warmup``) save the
state a step reaches before running it many times, put it back, and compare it bit for bit
(``jupyter_gpu/magics/replay/state.py``). This script times those three against one training
step, on models as large as the tutorials' and the issue's:

- ``gpt2``: the tutorials' GPT in GPT-2 style at GPT-2 small's shape (12 layers, d_model 768,
  vocabulary 50,304, context 1,024), AdamW, bf16 autocast, batch 8 x 1,024 tokens;
- ``resnet50``: torchvision's ResNet-50 (channels_last, batch 64, 224 px), SGD with momentum,
  a OneCycleLR and a GradScaler, fp16 autocast (skipped where torchvision is not installed).

For each: the step's median time; the save (``SavedState``: every tensor copied once, the
tables, the scheduler's and the scaler's state_dicts, the process-wide settings), the restore
and the check, each the median of ``--repeats``; the bytes saved and where; and whether the
check found everything back after ``--steps`` steps (it must: ``exact`` is printed).

    python benchmarks/restore_cost.py                         # on the GPU machine, ~1 min
    python benchmarks/restore_cost.py --device cpu --small    # a dry run without a GPU

Writes ``restore_cost.json`` to ``$JUPYTER_GPU_OUT`` (else ``$OUT``) when set.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a source tree without installing the package

import torch  # noqa: E402 (after the path set-up above)

from benchmarks.outputs import write_json  # noqa: E402 (after the path set-up)
from jupyter_gpu.magics.replay.reach import Named, reach  # noqa: E402
from jupyter_gpu.magics.replay.state import SavedState  # noqa: E402


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def median_s(fn: Callable[[], Any], device: str, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


GPT_STEP = """
def train_step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast(device, dtype=torch.bfloat16):
        loss = model(idx, targets)
    loss.backward()
    opt.step()
    return loss
"""

RESNET_STEP = """
def train_step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast(device, dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(model(images), labels)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    sched.step()
    return loss
"""


def gpt2(device: str, small: bool) -> dict[str, Any]:
    from jupyter_gpu.tutorials.gpt import GPT, GPTConfig

    shape = (2, 64, 256, 64, 2, 4) if small else (12, 768, 50_304, 1024, 8, 12)
    layers, width, vocab, context, batch, heads = shape
    config = GPTConfig(vocab, context, layers, heads, width, style="gpt2")
    model = GPT(config).to(device)
    ns: dict[str, Any] = {
        "__name__": "__main__",
        "torch": torch,
        "device": device,
        "model": model,
        "opt": torch.optim.AdamW(model.parameters(), lr=3e-4, fused=device == "cuda"),
        "idx": torch.randint(0, vocab, (batch, context), device=device),
        "targets": torch.randint(0, vocab, (batch, context), device=device),
    }
    exec(GPT_STEP, ns)  # the benchmark's own step
    return ns


def resnet50(device: str, small: bool) -> dict[str, Any] | None:
    try:
        import torchvision
    except ImportError:
        return None
    batch, size = (4, 64) if small else (64, 224)
    model = torchvision.models.resnet50().to(device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ns: dict[str, Any] = {
        "__name__": "__main__",
        "torch": torch,
        "device": device,
        "model": model,
        "opt": opt,
        "sched": torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.4, total_steps=100_000),
        "scaler": torch.amp.GradScaler(device),
        "images": torch.randn(batch, 3, size, size, device=device).to(
            memory_format=torch.channels_last
        ),
        "labels": torch.randint(0, 1000, (batch,), device=device),
    }
    exec(RESNET_STEP, ns)  # the benchmark's own step
    return ns


def measure(name: str, ns: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    device = args.device
    step = ns["train_step"]
    for _ in range(3):
        step()  # the optimizer's state exists, the kernels are chosen
    step_s = median_s(step, device, args.repeats)
    named = Named({"model": ns["model"]}, {"opt": ns["opt"]})
    reached = reach([compile("train_step()", "<bench>", "eval")], ns, named)
    if reached.problems:
        raise SystemExit(f"{name}: {[p.sentence() for p in reached.problems]}")
    saves = []
    state = None
    for _ in range(args.repeats):
        if state is not None:
            state.release()
        sync(device)
        start = time.perf_counter()
        state = SavedState(named.models, named.optimizers, reached)
        sync(device)
        saves.append(time.perf_counter() - start)
    assert state is not None
    for _ in range(args.steps):
        step()
    restore_s = median_s(state.restore, device, args.repeats)
    check_s = median_s(state.check, device, args.repeats)
    check = state.check()
    parts = state.parts(check)
    row = {
        "model": name,
        "step_ms": step_s * 1e3,
        "save_ms": statistics.median(saves) * 1e3,
        "restore_ms": restore_s * 1e3,
        "check_ms": check_s * 1e3,
        "saved_mib": state.saved_bytes / 2**20,
        "where": state.where,
        "tensors": len(state.tensors),
        "tables": len(state.structures),
        "settings": len(state.settings.names),
        "exact": not check.mismatched and not check.uncompared,
        "mismatched": check.mismatched[:5],
        "parts": [f"{p.label} ({p.kind})" for p in parts if p.kind != "setting"],
    }
    state.release()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="tiny shapes (a dry run)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5, help="steps between save and restore")
    args = parser.parse_args()
    rows = []
    for name, build in (("gpt2", gpt2), ("resnet50", resnet50)):
        ns = build(args.device, args.small)
        if ns is None:
            print(f"{name}: skipped (torchvision is not installed)")
            continue
        rows.append(measure(name, ns, args))
        del ns
        if args.device == "cuda":
            torch.cuda.empty_cache()
    header = f"{'model':<9} {'step':>9} {'save':>9} {'restore':>9} {'check':>9} {'saved':>10}"
    print(f"{header} {'where':>5} {'tensors':>7} {'tables':>6} exact")
    for r in rows:
        print(
            f"{r['model']:<9} {r['step_ms']:>7.1f}ms {r['save_ms']:>7.1f}ms "
            f"{r['restore_ms']:>7.1f}ms {r['check_ms']:>7.1f}ms {r['saved_mib']:>6.0f} MiB "
            f"{r['where']:>5} {r['tensors']:>7} {r['tables']:>6} {r['exact']}"
        )
        print(f"  put back: {', '.join(r['parts'])}; {r['settings']} process-wide settings")
        if r["mismatched"]:
            print(f"  differ: {', '.join(r['mismatched'])}")
    write_json("restore_cost.json", rows)
    if not all(r["exact"] for r in rows):
        raise SystemExit("a saved state did not come back exactly (see 'differ')")


if __name__ == "__main__":
    main()
