"""Why notebook 07's checkpointed step recompiles on "GLOBAL_STATE changed: num_threads".

Dynamo's global-state guard compares ``torch.get_num_threads()`` with its value when the graph
was compiled, in whichever thread calls the compiled code. The guess this probe tests:

- activation checkpointing re-runs each block's forward during the backward pass, and on a GPU the
  backward runs on autograd's device thread, not the notebook's;
- a DataLoader's pin-memory thread calls ``torch.set_num_threads(1)``; the count is per thread, but
  torch also keeps it as the default for threads that have not read theirs yet;
- autograd's device thread reads its count lazily, at its first ``torch.get_num_threads()`` (here:
  the guard's), so after a pinned loader it reads 1 where the notebook's thread reads 16.

Each case runs in a fresh process, in notebook 07's order: the main thread uses torch first, one
backward on the GPU starts autograd's device thread, then a pinned loader is iterated (or not),
then a compiled block runs three steps (checkpointed or not). The last case sets the main thread's
count again after the loader (``torch.set_num_threads(torch.get_num_threads())``), which resets
that default. For each it prints the threads that ran the block's forward with their
``torch.get_num_threads()``, how many graphs Dynamo compiled for the block, and the recompile
reason that ``TORCH_LOGS=recompiles`` gave.

    python benchmarks/checkpoint_threads.py    # needs CUDA; about 30 s on one H200
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

CASES = [(pin, ckpt, False) for pin in (False, True) for ckpt in (False, True)] + [
    (True, True, True)
]


def child(pin: bool, ckpt: bool, reset: bool) -> dict[str, object]:
    import threading

    import torch
    from torch.utils.checkpoint import checkpoint

    device = "cuda" if torch.cuda.is_available() else "cpu"  # on CPU: a dry run
    main_threads = torch.get_num_threads()  # the notebook's thread has used torch by now
    warm = torch.randn(8, 8, device=device, requires_grad=True)
    (warm * 2).sum().backward()  # autograd's device thread starts here (07's first steps)
    if pin:  # as notebook 07's loader: a worker process and a pin-memory thread
        data = torch.utils.data.TensorDataset(torch.randn(64, 8))
        for _ in torch.utils.data.DataLoader(data, batch_size=8, num_workers=1, pin_memory=True):
            pass
    if reset:
        torch.set_num_threads(torch.get_num_threads())
    compiles = 0

    def counting_backend(gm: torch.fx.GraphModule, _inputs: object) -> object:
        nonlocal compiles
        compiles += 1
        return gm.forward

    layer = torch.nn.Linear(64, 64, device=device)
    block = torch.compile(layer, backend=counting_backend)
    seen: list[tuple[str, int]] = []

    def run_block(x: torch.Tensor) -> torch.Tensor:
        seen.append((threading.current_thread().name, torch.get_num_threads()))
        return block(x)

    x = torch.randn(32, 64, device=device, requires_grad=True)
    for _ in range(3):
        y = checkpoint(run_block, x, use_reentrant=False) if ckpt else run_block(x)
        y.sum().backward()
    if device == "cuda":
        torch.cuda.synchronize()
    return {
        "device": device,
        "main_thread_num_threads": main_threads,
        "forward_ran_in": sorted({f"{name} ({n} threads)" for name, n in seen}),
        "graphs_compiled": compiles,
    }


def main() -> None:
    if len(sys.argv) == 4:
        print(json.dumps(child(*(arg == "1" for arg in sys.argv[1:]))))
        return
    rows = []
    for pin, ckpt, reset in CASES:
        env = dict(os.environ, TORCH_LOGS="recompiles")
        done = subprocess.run(
            [sys.executable, __file__, *(str(int(flag)) for flag in (pin, ckpt, reset))],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        if done.returncode:
            print(done.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"case pin={pin} checkpoint={ckpt} failed")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        reasons = [line.strip() for line in done.stderr.splitlines() if "GLOBAL_STATE" in line]
        rows.append((pin, ckpt, reset, result, reasons))
    import torch

    print(f"device: {rows[0][3]['device']}, torch {torch.__version__}")
    print(
        "| pinned loader | checkpointing | count set again after it | main thread "
        "| the block's forward ran in | graphs compiled | recompile reason |"
    )
    print("|---|---|---|---:|---|---:|---|")
    for pin, ckpt, reset, result, reasons in rows:
        print(
            f"| {'yes' if pin else 'no'} | {'yes' if ckpt else 'no'} | {'yes' if reset else 'no'} "
            f"| {result['main_thread_num_threads']} | {', '.join(result['forward_ran_in'])} "  # type: ignore[arg-type]
            f"| {result['graphs_compiled']} | {reasons[0][-60:] if reasons else '-'} |"
        )


if __name__ == "__main__":
    main()
