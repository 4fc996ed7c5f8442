"""Notebook 02's ``torch.backends.cudnn.benchmark`` measurement, one fresh process per round.

Why processes and not :func:`jupyter_gpu.measure.compare` in the kernel: cuDNN's chosen plan is
cached per shape, and the cache's key does not hold the flag. torch's
``aten/src/ATen/native/cudnn/Conv_v8.cpp`` builds ``CacheKeyWrapper key(operation, y, x, w,
padding, stride, dilation, groups, deterministic, allow_tf32)`` and ``run_single_conv`` first
looks the key up in ``benchmark_cache``; only on a miss does it ask the heuristics
(``benchmark`` off) or search (``benchmark`` on), and either answer is cached. So in one
process, whichever setting meets a shape first decides its plan for the other too. A round here
is one process with the flag off and one with it on (the order alternating), each running the
same three measurements; the rounds' paired ratios and their interval are the one timing
method's (:func:`jupyter_gpu.measure.paired_ratio`).

In each process (``python -m jupyter_gpu.tutorials.cudnn_bench``), on a small convolutional
network's training step (channels-last, under autocast where given):

- ``first_call_s``: the first step at a shape (the search, if on, runs in it);
- ``steady_s``: a step at that shape afterwards, the mean of a block of steps (CUDA events);
- ``new_shape_s``: a step whose images have a size not seen before, every time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from jupyter_gpu.magics.output.progress_bar import ProgressBar
from jupyter_gpu.measure import Ratio, paired_ratio

KINDS = ("first_call_s", "steady_s", "new_shape_s")


@dataclass(frozen=True)
class ProcessTimes:
    """One process's three figures (seconds per step), with the flag as that process had it."""

    benchmark: bool
    first_call_s: float
    steady_s: float
    new_shape_s: float


@dataclass(frozen=True)
class CudnnComparison:
    """Every round's two processes: ``off[i]`` and ``on[i]`` ran in round ``i``."""

    off: tuple[ProcessTimes, ...]
    on: tuple[ProcessTimes, ...]

    def ratio(self, kind: str) -> Ratio:
        """How many times longer the ``off`` process took than the ``on`` one (above 1: on wins).

        Raises:
            KeyError: ``kind`` is not one of :data:`KINDS`.
        """
        if kind not in KINDS:
            raise KeyError(f"{kind!r}: one of {', '.join(KINDS)}")
        return paired_ratio(
            [getattr(t, kind) for t in self.off],
            [getattr(t, kind) for t in self.on],
            variant="benchmark on",
            baseline="benchmark off",
        )

    def median_s(self, kind: str, benchmark: bool) -> float:
        """The median over rounds of one setting's figure."""
        import statistics

        chosen = self.on if benchmark else self.off
        return float(statistics.median(float(getattr(t, kind)) for t in chosen))


def conv_net(classes: int = 10) -> Any:
    """Four 3x3 convolutions with batch norm and ReLU, pooled, then a linear layer."""
    from torch import nn

    def block(c_in: int, c_out: int, stride: int) -> list[nn.Module]:
        return [
            nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(c_out),
            nn.ReLU(inplace=True),
        ]

    return nn.Sequential(
        *block(3, 64, 1),
        *block(64, 128, 2),
        *block(128, 256, 2),
        *block(256, 256, 1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(256, classes),
    )


def measure(
    *, benchmark: bool, batch: int, size: int, new_shapes: int, steps: int, dtype: str, device: str
) -> ProcessTimes:
    """The three figures in this process (see the module's doc), with the flag set first."""
    import torch
    import torch.nn.functional as F

    from jupyter_gpu.measure import synchronize, time_back_to_back, time_first_call

    torch.backends.cudnn.benchmark = benchmark
    torch.manual_seed(0)
    net = conv_net().to(device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype)

    def images(side: int) -> tuple[Any, Any]:
        x = torch.randn(batch, 3, side, side, device=device)
        y = torch.randint(0, 10, (batch,), device=device)
        return x.contiguous(memory_format=torch.channels_last), y

    def step(x: Any, y: Any) -> None:
        with torch.autocast(
            device, dtype=autocast_dtype or torch.float32, enabled=bool(autocast_dtype)
        ):
            loss = F.cross_entropy(net(x), y)
        loss.backward()  # type: ignore[no-untyped-call]  # torch leaves it untyped
        opt.step()
        opt.zero_grad(set_to_none=True)

    fixed = images(size)
    first = time_first_call(lambda: step(*fixed), device=device)
    steady = time_back_to_back(lambda: step(*fixed), calls=steps, runs=1, warmup=1, device=device)
    sides = iter(range(size + 2, size + 2 + 2 * new_shapes, 2))  # each size once: never cached
    batches = [images(next(sides)) for _ in range(new_shapes)]
    synchronize(device)
    start = time.perf_counter()
    for x, y in batches:
        step(x, y)
    synchronize(device)
    new_shape = (time.perf_counter() - start) / new_shapes
    return ProcessTimes(benchmark, first, steady.median_s, new_shape)


def in_fresh_process(
    benchmark: bool, settings: Mapping[str, Any], timeout_s: float = 300
) -> ProcessTimes:
    """:func:`measure` in a new Python process (``settings``: its keyword arguments but the flag).

    Raises:
        RuntimeError: the process failed (its last lines of output are the message).
    """
    command = [sys.executable, "-m", __name__, "--benchmark", str(benchmark)]
    for name, value in settings.items():
        command += [f"--{name.replace('_', '-')}", str(value)]
    done = subprocess.run(  # noqa: S603  # this interpreter running this module
        command,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
        raise RuntimeError(f"the fresh process failed ({done.returncode}): {tail}")
    return ProcessTimes(**json.loads(lines[-1]))


def compare_in_processes(rounds: int, settings: Mapping[str, Any]) -> CudnnComparison:
    """``rounds`` rounds of one process with the flag off and one with it on, order alternating.

    Raises:
        ValueError: ``rounds`` < 1.
        RuntimeError: a process failed.
    """
    if rounds < 1:
        raise ValueError(f"need at least one round, got {rounds}")
    off: list[ProcessTimes] = []
    on: list[ProcessTimes] = []
    # Each process starts Python, torch and CUDA: on the H200, 12 of them took two minutes, a
    # cell without output that long looks hung, so a bar says how far it is (in a notebook).
    total = 2 * rounds
    bar = ProgressBar(_shell(), total)
    started = time.monotonic()
    try:
        for i in range(rounds):
            for flag in (False, True) if i % 2 == 0 else (True, False):
                done = len(off) + len(on)
                bar.show(
                    done,
                    total,
                    f"cudnn.benchmark: fresh process {done + 1} of {total} "
                    f"(benchmark {'on' if flag else 'off'}), {time.monotonic() - started:.0f} s",
                )
                (on if flag else off).append(in_fresh_process(flag, settings))
    finally:
        bar.close()
    return CudnnComparison(tuple(off), tuple(on))


def _shell() -> Any:
    """The IPython shell this runs in, if any (a notebook's kernel draws the bar)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def main(argv: list[str] | None = None) -> None:
    """Measure in this (fresh) process and print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmark", choices=["True", "False"], required=True)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--size", type=int, default=96)
    parser.add_argument("--new-shapes", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)
    times = measure(
        benchmark=args.benchmark == "True",
        batch=args.batch,
        size=args.size,
        new_shapes=args.new_shapes,
        steps=args.steps,
        dtype=args.dtype,
        device=args.device,
    )
    print(json.dumps(asdict(times)))  # noqa: T201  # the parent reads this line


if __name__ == "__main__":
    main()
