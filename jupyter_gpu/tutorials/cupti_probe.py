"""Does a profile slow down what runs after it? Steps of processes that profiled and did not.

On a GPU, torch's profiler records kernels through NVIDIA's CUPTI. Kineto, the profiler's
library, tears CUPTI down when a profile ends only when ``TEARDOWN_CUPTI=1`` is set
(``cuptiTearDown_()`` in Kineto's ``CuptiActivityApi.cpp``); otherwise CUPTI stays attached to
the process, and pytorch/pytorch#144455 reports later steps running slower for it. Whether a
process has profiled is a state of that process, so the comparison needs several processes: one
child per variant (never profiled; profiled once; profiled once with ``TEARDOWN_CUPTI=1``),
each training notebook 04's CNN on one batch that stays on its device.

The children are timed as the one timing method times variants (``jupyter_gpu.measure``): in
rounds, each round one block of steps per child, the order reversed every other round, so a
drift of the machine falls on every variant alike; ratios are the medians of the round-paired
ratios, with their interval. Only one child runs at a time: the others wait for their turn.

Run as ``python -m jupyter_gpu.tutorials.cupti_probe child ...`` (what :func:`measure` starts).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from jupyter_gpu.measure import Comparison, Timing

#: Lines of the children's protocol start with this (torch may print other lines).
MARK = "CUPTI_PROBE "
#: How long a child may take to start (torch, CUDA, warm-up, profile) or to time a block.
REPLY_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class ProbeVariant:
    """One child: whether it profiles before it is timed, and extra environment variables."""

    profiled: bool
    env: Mapping[str, str] = field(default_factory=dict)


#: The three processes the notebook compares.
VARIANTS: dict[str, ProbeVariant] = {
    "never profiled": ProbeVariant(profiled=False),
    "profiled once": ProbeVariant(profiled=True),
    "profiled once, TEARDOWN_CUPTI=1": ProbeVariant(profiled=True, env={"TEARDOWN_CUPTI": "1"}),
}


@dataclass(frozen=True)
class ProbeSize:
    """The step each child times: notebook 04's CNN (``width``) on one ``batch`` of images."""

    device: str
    size: int
    batch: int
    width: int
    steps_per_block: int
    profile_steps: int = 5


class ProbeError(RuntimeError):
    """A child did not start, failed, or did not answer in time (the message says which)."""


class _Child:
    """One child process and a thread that reads its protocol lines."""

    def __init__(self, name: str, variant: ProbeVariant, size: ProbeSize) -> None:
        self.name = name
        args = [
            sys.executable,
            "-m",
            "jupyter_gpu.tutorials.cupti_probe",
            "child",
            f"--device={size.device}",
            f"--size={size.size}",
            f"--batch={size.batch}",
            f"--width={size.width}",
            f"--steps={size.steps_per_block}",
            f"--profile-steps={size.profile_steps if variant.profiled else 0}",
        ]
        self.proc = subprocess.Popen(  # noqa: S603  # our own module, this interpreter
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **variant.env},
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        assert self.proc.stdout is not None
        assert self.proc.stderr is not None
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()
        threading.Thread(target=self._keep, args=(self.proc.stderr,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            if line.startswith(MARK):
                self._lines.put(line[len(MARK) :])
        self._lines.put(None)  # the child closed its output

    def _keep(self, stream: IO[str]) -> None:
        for line in stream:
            self._stderr.append(line)
            del self._stderr[:-20]  # the last lines say why a child failed

    def reply(self, timeout_s: float = REPLY_TIMEOUT_S) -> dict[str, Any]:
        """The child's next protocol message.

        Raises:
            ProbeError: the child exited or did not answer within ``timeout_s``.
        """
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            raise ProbeError(f"{self.name}: no answer within {timeout_s:.0f} s") from None
        if line is None:
            self.proc.wait(timeout=10)
            tail = "".join(self._stderr[-5:]).strip()
            raise ProbeError(f"{self.name}: exited with {self.proc.returncode}: {tail}")
        message: dict[str, Any] = json.loads(line)
        return message

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def measure(
    size: ProbeSize,
    *,
    rounds: int,
    variants: Mapping[str, ProbeVariant] | None = None,
) -> Comparison:
    """Time each variant's child in ``rounds`` interleaved rounds; per-step times.

    The first variant is the baseline of ``result.ratio(name)``.

    Raises:
        ProbeError: a child failed to start or to answer (its last error lines are quoted).
        ValueError: ``rounds`` < 1 or no variants.
    """
    chosen = dict(variants if variants is not None else VARIANTS)
    if rounds < 1 or not chosen:
        raise ValueError(f"need rounds >= 1 and a variant, got {rounds=}, {len(chosen)} variants")
    children = {name: _Child(name, variant, size) for name, variant in chosen.items()}
    try:
        for child in children.values():
            child.reply()  # ready: warmed up, and profiled if it was to be
        times: dict[str, list[float]] = {name: [] for name in children}
        order = list(children)
        for done in range(rounds):
            for name in order if done % 2 == 0 else reversed(order):
                children[name].send("block")
                times[name].append(float(children[name].reply()["step_s"]))
    finally:
        for child in children.values():
            child.stop()
    timings = {
        name: Timing(tuple(values), warmup=1, calls_per_run=size.steps_per_block)
        for name, values in times.items()
    }
    clock = "perf_counter around a synchronised block, in each child process"
    return Comparison(timings, next(iter(timings)), rounds, clock)


# ---------------------------------------------------------------------------- the child


def _child(argv: Sequence[str]) -> None:
    """A child: build the step, warm up, profile if asked, then time blocks on request."""
    parser = argparse.ArgumentParser(prog="cupti_probe child")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--profile-steps", type=int, default=0)
    args = parser.parse_args(argv)

    import torch
    import torch.nn.functional as F

    from jupyter_gpu.measure import synchronize
    from jupyter_gpu.tutorials.digits import DigitsCNN

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if not cuda:
        torch.set_num_threads(1)  # the children take turns; one thread each keeps them alike
    torch.manual_seed(0)
    model: Any = DigitsCNN(args.width).to(device)
    model.to(memory_format=torch.channels_last)  # torch's stubs omit memory_format
    optimizer = torch.optim.AdamW(model.parameters(), fused=cuda)
    x = torch.randn(args.batch, 1, args.size, args.size, device=device)
    x = x.to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (args.batch,), device=device)
    amp = cuda and torch.cuda.is_bf16_supported()

    def step() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            loss: Any = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(5):
        step()
    if args.profile_steps:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities):
            for _ in range(args.profile_steps):
                step()
            synchronize(device)
    synchronize(device)
    _say({"ready": True})
    for line in sys.stdin:
        if line.strip() != "block":
            break
        synchronize(device)
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        synchronize(device)
        _say({"step_s": (time.perf_counter() - start) / args.steps})


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(MARK + json.dumps(message) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":  # pragma: no cover - run as a child process by measure()
    if sys.argv[1:2] != ["child"]:
        sys.exit("usage: python -m jupyter_gpu.tutorials.cupti_probe child [options]")
    _child(sys.argv[2:])
