"""Notebook 04's training step as a script, each phase in an NVTX range, for ``nsys profile``.

``python -m jupyter_gpu.tutorials.nvtx_steps --steps 20`` trains the digits CNN on random
batches that stay on the GPU (the model alone: no input pipeline) and marks, per step, a
``step`` range holding ``forward``, ``backward`` and ``optimizer`` ranges with
``torch.cuda.nvtx.range_push``/``range_pop`` (torch's binding to NVIDIA's NVTX library; in
Nsight Systems a range is a bar on the CPU thread's row, above the kernels its code launched;
notebook 04 measures what the ranges cost a step). Needs CUDA: torch's NVTX binding is part of
its CUDA build.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any


def main(argv: Sequence[str] | None = None) -> None:
    """Train ``--steps`` steps (after 5 unmarked warm-up steps) with NVTX ranges.

    Raises:
        SystemExit: no CUDA device.
    """
    parser = argparse.ArgumentParser(prog="python -m jupyter_gpu.tutorials.nvtx_steps")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--width", type=int, default=32)
    args = parser.parse_args(argv)

    import importlib

    import torch
    import torch.nn.functional as F

    from jupyter_gpu.tutorials.digits import DigitsCNN

    nvtx: Any = importlib.import_module("torch.cuda.nvtx")  # untyped in torch

    if not torch.cuda.is_available():
        raise SystemExit("nvtx_steps needs a CUDA GPU: NVTX ranges are for NVIDIA's tools")
    torch.manual_seed(0)
    model: Any = DigitsCNN(args.width).cuda()
    model.to(memory_format=torch.channels_last)  # torch's stubs omit memory_format
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    x = torch.randn(args.batch, 1, args.size, args.size, device="cuda")
    x = x.to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (args.batch,), device="cuda")
    amp = torch.cuda.is_bf16_supported()

    def step(marked: bool) -> None:
        if marked:
            nvtx.range_push("forward")
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss: Any = F.cross_entropy(model(x), y)
        if marked:
            nvtx.range_pop()
            nvtx.range_push("backward")
        loss.backward()
        if marked:
            nvtx.range_pop()
            nvtx.range_push("optimizer")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if marked:
            nvtx.range_pop()

    for _ in range(5):
        step(marked=False)
    torch.cuda.synchronize()
    for _ in range(args.steps):
        nvtx.range_push("step")
        step(marked=True)
        nvtx.range_pop()
    torch.cuda.synchronize()


if __name__ == "__main__":  # pragma: no cover - run under nsys by notebook 04
    main()
