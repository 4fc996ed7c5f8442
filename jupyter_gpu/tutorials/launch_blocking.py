"""What ``CUDA_LAUNCH_BLOCKING=1`` costs and what it is for, in fresh processes (notebook 00).

CUDA reads ``CUDA_LAUNCH_BLOCKING`` once, when a process initialises CUDA, so a notebook that is
already using its GPU cannot switch it on: both measurements run in child processes started with
and without it.

- :func:`launch_blocking_cost`: two children, one with ``CUDA_LAUNCH_BLOCKING=1`` and one
  without, each holding a small tensor on the GPU, are asked in turn, round after round (the
  order alternating, as :func:`jupyter_gpu.measure.compare` does within one process), to launch
  a block of tiny kernels and report the block's time per launch (``perf_counter`` around a
  synchronised block: the wall time a training loop feels). While one child times, the other
  waits on its pipe and runs nothing on the GPU. The ratio is the median of the rounds' paired
  ratios with its order-statistic interval (:func:`jupyter_gpu.measure.paired_ratio`).
- :func:`error_location`: a child makes the most common asynchronous error on purpose (a class
  label outside the classes, given to ``cross_entropy``), does a little more work, then reads the
  loss; it reports the line of its own code at which Python raised. Without the variable the
  error surfaces at a later CUDA call; with it, at the launch that failed (PyTorch's CUDA
  semantics notes, *Asynchronous execution*).

Run as ``python -m jupyter_gpu.tutorials.launch_blocking serve|error --device cuda``; the
functions below start it.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from typing import IO

from jupyter_gpu.measure import Ratio, Timing, paired_ratio

__all__ = ["BlockingCost", "ErrorLocation", "error_location", "launch_blocking_cost"]

#: Seconds a child may take to import torch and initialise CUDA before it answers "ready".
START_DEADLINE_S = 120.0
_VARIABLE = "CUDA_LAUNCH_BLOCKING"


@dataclass(frozen=True)
class BlockingCost:
    """Per-launch times of tiny kernels with and without ``CUDA_LAUNCH_BLOCKING=1``.

    ``ratio`` is the blocking child's speed over the default's (below 1: blocking is slower),
    with its interval over ``ratio.rounds`` rounds.
    """

    default: Timing
    blocking: Timing
    ratio: Ratio
    launches: int
    device: str

    def describe(self) -> str:
        """Both times per launch and the ratio, in one sentence."""
        return (
            f"a tiny kernel took {_us(self.default.median_s)} a launch by default and "
            f"{_us(self.blocking.median_s)} with {_VARIABLE}=1 (medians of {self.ratio.rounds} "
            f"rounds of {self.launches:,} launches, each child in turn): blocking is "
            f"{self.ratio.describe()}"
        )


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.3g} µs"


def _child_env(blocking: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (_VARIABLE, "TORCH_LOGS")}
    if blocking:
        env[_VARIABLE] = "1"
    return env


def _start(mode: str, device: str, blocking: bool, *extra: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "jupyter_gpu.tutorials.launch_blocking", mode]
    command += ["--device", device, *extra]
    return subprocess.Popen(  # noqa: S603  # our own module, this Python
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_child_env(blocking),
    )


def _read_line(child: subprocess.Popen[str], what: str) -> str:
    """The child's next line on stdout; its stderr in the error if it ended instead."""
    assert child.stdout is not None
    line = child.stdout.readline()
    if not line:
        error = child.stderr.read() if child.stderr is not None else ""
        raise RuntimeError(f"the {what} child ended early:\n{error[-3000:]}")
    return line.strip()


def launch_blocking_cost(
    *, device: str = "cuda", rounds: int = 8, launches: int = 2000
) -> BlockingCost:
    """Time tiny-kernel launches in two children, with and without the variable, in turns.

    Raises:
        ValueError: ``rounds`` or ``launches`` < 1.
        RuntimeError: a child failed (its stderr is in the message).
    """
    if rounds < 1 or launches < 1:
        raise ValueError(f"need rounds and launches >= 1, got {rounds=}, {launches=}")
    children = {
        "default": _start("serve", device, False, "--launches", str(launches)),
        "blocking": _start("serve", device, True, "--launches", str(launches)),
    }
    times: dict[str, list[float]] = {name: [] for name in children}
    try:
        for name, child in children.items():
            answer = _read_line(child, name)
            if answer != "ready":
                raise RuntimeError(f"the {name} child said {answer!r} instead of 'ready'")
        order = list(children)
        for done in range(rounds):
            for name in order if done % 2 == 0 else reversed(order):
                child = children[name]
                assert child.stdin is not None
                child.stdin.write("time\n")
                child.stdin.flush()
                times[name].append(float(_read_line(child, name)))
    finally:
        for child in children.values():
            _stop(child)
    ratio = paired_ratio(
        times["default"], times["blocking"], variant="blocking", baseline="default"
    )
    return BlockingCost(
        Timing(tuple(times["default"]), 1, launches),
        Timing(tuple(times["blocking"]), 1, launches),
        ratio,
        launches,
        device,
    )


def _stop(child: subprocess.Popen[str]) -> None:
    with contextlib.suppress(OSError, ValueError):
        if child.stdin is not None:
            child.stdin.close()  # the child ends at the end of its input
    try:
        child.wait(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()  # our own child, by its handle
        child.wait()
    for stream in (child.stdout, child.stderr):
        if stream is not None:
            stream.close()


@dataclass(frozen=True)
class ErrorLocation:
    """Where Python raised a CUDA error, against the line that launched the failing kernel.

    Attributes:
        blocking: whether the child ran with ``CUDA_LAUNCH_BLOCKING=1``.
        fault_line: the line (of :func:`_make_the_error`) whose kernel fails.
        raised_line: the line at which Python raised, or ``None`` if nothing raised.
        source: that function's lines, numbered as the two lines are.
        error: the error's first line.
    """

    blocking: bool
    fault_line: int
    raised_line: int | None
    source: tuple[tuple[int, str], ...]
    error: str

    @property
    def at_the_fault(self) -> bool:
        """Whether the error surfaced at the line that caused it."""
        return self.raised_line == self.fault_line


def error_location(*, device: str = "cuda", blocking: bool) -> ErrorLocation:
    """Make the error in a fresh child, with or without the variable; where did it surface?

    Raises:
        RuntimeError: the child failed in another way (its stderr is in the message).
    """
    child = _start("error", device, blocking)
    try:
        out, err = child.communicate(timeout=START_DEADLINE_S)
    except subprocess.TimeoutExpired:
        child.kill()  # our own child, by its handle
        out, err = child.communicate()
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"the error child printed no result:\n{err[-3000:]}")
    found = json.loads(lines[-1])
    return ErrorLocation(
        blocking,
        int(found["fault_line"]),
        found["raised_line"],
        tuple((int(n), str(text)) for n, text in found["source"]),
        str(found["error"]),
    )


# ------------------------------------------------------------------ the children


def _make_the_error(device: str) -> float:
    """Ten classes, one label of 10: cross_entropy's kernel asserts on the GPU, asynchronously."""
    import torch

    logits = torch.randn(4, 10, device=device)
    labels = torch.tensor([3, 10, 1, 2], device=device)  # 10 is not a class
    loss = torch.nn.functional.cross_entropy(logits, labels)  # the faulty launch
    scaled = loss * 2 + 1  # more work, queued behind it
    total = scaled.exp()
    return float(total.item())  # .item() waits for the GPU


def _error_child(device: str) -> None:
    lines, first = inspect.getsourcelines(_make_the_error)
    source = [(first + i, text.rstrip()) for i, text in enumerate(lines)]
    fault = next(n for n, text in source if "# the faulty launch" in text)
    raised: int | None = None
    message = "no error"
    try:
        _make_the_error(device)
    except (RuntimeError, IndexError) as error:  # CUDA errors arrive as RuntimeError
        frames = [
            f for f in traceback.extract_tb(error.__traceback__) if f.name == "_make_the_error"
        ]
        raised = frames[-1].lineno if frames else None
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    result = {"fault_line": fault, "raised_line": raised, "source": source, "error": message}
    print(json.dumps(result))  # noqa: T201  # the child's one result line, read by the parent


def _serve_child(device: str, launches: int, stdin: IO[str]) -> None:
    import torch

    x = torch.ones(1024, device=device)
    cuda = torch.device(device).type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    for _ in range(3):  # warm up: the first launches load the kernel
        for _ in range(launches):
            x.mul_(1.0)
        sync()
    print("ready", flush=True)  # noqa: T201  # the protocol with the parent
    for line in stdin:
        if line.strip() != "time":
            break
        sync()
        start = time.perf_counter()
        for _ in range(launches):
            x.mul_(1.0)
        sync()
        print((time.perf_counter() - start) / launches, flush=True)  # noqa: T201  # protocol


def main(argv: list[str] | None = None) -> int:
    """The child processes' entry point; see the module's docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("mode", choices=["serve", "error"])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--launches", type=int, default=2000)
    args = parser.parse_args(argv)
    if args.mode == "error":
        _error_child(args.device)
    else:
        _serve_child(args.device, args.launches, sys.stdin)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
