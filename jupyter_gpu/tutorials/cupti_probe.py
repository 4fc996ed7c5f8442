"""Does a profile slow down what runs after it? Steps of processes that profiled and did not.

On a GPU, torch's profiler records kernels through NVIDIA's CUPTI. Kineto, the profiler's
library, tears CUPTI down when a profile ends only when ``TEARDOWN_CUPTI=1`` is set
(``cuptiTearDown_()`` in Kineto's ``CuptiActivityApi.cpp``); otherwise CUPTI stays attached to
the process, and pytorch/pytorch#144455 reports later steps running slower for it. Whether a
process has profiled is a state of that process, so the comparison needs several processes: one
child per variant (never profiled; profiled once; profiled once with ``TEARDOWN_CUPTI=1``).

Each child times one or both of notebook 04's steps (:data:`STEPS`): its CNN on one batch that
stays on the device ("model"), and the same CNN fed by section 5's pipeline ("pipeline": raw
digit batches indexed and pinned on the CPU, copied with ``non_blocking=True``, augmented on the
device by ``augment_on_device``; compiled with ``torch.compile`` when :attr:`ProbeSize.compiled`
is set, as the notebook runs it on a GPU), which launches more kernels a step and keeps the CPU
busier. The step the GPU bounds hides a cost per launch that the pipeline's step shows.

The children are timed as the one timing method times variants (``jupyter_gpu.measure``): in
rounds, each round one block of steps per child and step, the order reversed every other round, so
a drift of the machine falls on every variant alike; ratios are the medians of the round-paired
ratios, with their interval. Only one child runs at a time: the others wait for their turn. That
interval is of the rounds, within each process; two processes can also differ by themselves (on a
2-core CPU, three children of one variant timed the same steps up to 1.45x apart; on one H100 a
child's model alone ran 1.25x slower than its sibling's). So a profile's cost is read with the
model alone as a control in each process (:meth:`ProbeResult.within_process`), as well as step
against step across processes. Every child runs the same steps before it is timed, profiled or not.

A child asked to quit that has not exited within :data:`QUIT_TIMEOUT_S` is killed, and the result
names it: ``benchmarks/gpu_augmentation.py``, profiled with ``TEARDOWN_CUPTI=1``, twice did not
exit by itself on an H100 under torch 2.11, where this probe's children did
(``benchmarks/RESULTS.md``, 2026-12-06).

Run as ``python -m jupyter_gpu.tutorials.cupti_probe child ...`` (what :func:`measure` starts).
"""

from __future__ import annotations

import argparse
import contextlib
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

from jupyter_gpu.measure import Comparison, Ratio, Timing, paired_ratio

#: Lines of the children's protocol start with this (torch may print other lines).
MARK = "CUPTI_PROBE "
#: How long a child may take to start (torch, CUDA, warm-up, profile) or to time a block.
REPLY_TIMEOUT_S = 300.0
#: How long a child asked to quit may take to exit before it is killed.
QUIT_TIMEOUT_S = 15.0
#: The steps a child can time, by the name the protocol uses, with the label results carry.
STEPS: dict[str, str] = {
    "model": "model alone",
    "pipeline": "raw batches + augmentation on the device",
}


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
    """The steps' sizes: notebook 04's CNN (``width``), ``batch`` images of ``size`` px."""

    device: str
    size: int
    batch: int
    width: int
    steps_per_block: int
    profile_steps: int = 5
    #: The pipeline's augmentation compiled (``torch.compile``, in the child's own process: no
    #: pool of compile workers starts beside the timing), before the child's warm-up ends.
    compiled: bool = False


def probe_key(variant: str, step: str) -> str:
    """A child's step's name in :attr:`ProbeResult.timings`: ``"profiled once: model alone"``."""
    return f"{variant}: {STEPS[step]}"


@dataclass(frozen=True)
class ProbeResult:
    """The children's times, and which children had to be killed when asked to quit."""

    #: Per-step times of each (variant, step), keyed by :func:`probe_key`; the first is the
    #: baseline of ``timings.ratio(name)``.
    timings: Comparison
    #: The variants, in the order given (the first is the one the others are read against).
    variants: tuple[str, ...]
    #: The steps each child timed (names from :data:`STEPS`).
    steps: tuple[str, ...]
    #: Variants whose child did not exit within :data:`QUIT_TIMEOUT_S` of being asked to.
    killed: tuple[str, ...]

    def ratio(self, variant: str, step: str, *, against: tuple[str, str]) -> Ratio:
        """How many times longer ``against`` (variant, step) took than (``variant``, ``step``)."""
        return self.timings.ratio(probe_key(variant, step), baseline=probe_key(*against))

    def step_s(self, variant: str, step: str) -> float:
        """The median seconds of one step of ``step`` in ``variant``'s child."""
        return self.timings[probe_key(variant, step)].median_s

    def within_process(
        self, variant: str, *, against: str, step: str = "pipeline", control: str = "model"
    ) -> Ratio:
        """``step`` as a multiple of ``control`` in ``variant``'s child, against ``against``'s.

        Two processes of one variant can differ by themselves: on a 2-core CPU, three children
        that never profiled timed the same steps up to 1.45x apart, both steps alike. Each
        round's time of ``step`` is divided by the same round's time of ``control`` in the same
        child, which cancels what a child does to every step; the two children's quotients are
        then paired round by round, as any two variants are.
        """

        def quotients(name: str) -> list[float]:
            timed = self.timings[probe_key(name, step)].times_s
            controls = self.timings[probe_key(name, control)].times_s
            return [t / c for t, c in zip(timed, controls, strict=True)]

        return paired_ratio(
            quotients(against),
            quotients(variant),
            level=self.timings.level,
            variant=f"{variant}: {STEPS[step]} / {STEPS[control]}",
            baseline=f"{against}: {STEPS[step]} / {STEPS[control]}",
        )


class ProbeError(RuntimeError):
    """A child did not start, failed, or did not answer in time (the message says which)."""


class _Child:
    """One child process and a thread that reads its protocol lines."""

    def __init__(
        self, name: str, variant: ProbeVariant, size: ProbeSize, steps: Sequence[str]
    ) -> None:
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
            f"--profile-steps={size.profile_steps}",
            *(["--profile"] if variant.profiled else []),
            *(["--compile"] if size.compiled else []),
            f"--timed={','.join(steps)}",
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

    def ask_to_quit(self) -> None:
        """Tell the child to quit (it may have exited already)."""
        with contextlib.suppress(OSError):  # its stdin is closed: it has gone
            self.send("quit")

    def stop(self, deadline: float) -> bool:
        """Kill the child if it has not exited by ``deadline`` (monotonic). True if killed."""
        try:
            self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return True
        return False


def _stop_all(children: Mapping[str, _Child]) -> list[str]:
    """Ask every child to quit at once and give them :data:`QUIT_TIMEOUT_S` together.

    Returns the names of the children that had to be killed.
    """
    for child in children.values():
        child.ask_to_quit()
    deadline = time.monotonic() + QUIT_TIMEOUT_S
    return [name for name, child in children.items() if child.stop(deadline)]


def measure(
    size: ProbeSize,
    *,
    rounds: int,
    variants: Mapping[str, ProbeVariant] | None = None,
    steps: Sequence[str] = ("model",),
    start_order: Sequence[str] | None = None,
) -> ProbeResult:
    """Time ``steps`` in each variant's child in ``rounds`` interleaved rounds; per-step times.

    The children are started in ``start_order`` (default: the variants' order) and timed in the
    variants' order, so that a child's place in the rounds can be told from its place at start.

    Raises:
        ProbeError: a child failed to start or to answer (its last error lines are quoted).
        ValueError: ``rounds`` < 1, no variants, a step not in :data:`STEPS`, or a
            ``start_order`` that is not the variants' names.
    """
    chosen = dict(variants if variants is not None else VARIANTS)
    if rounds < 1 or not chosen:
        raise ValueError(f"need rounds >= 1 and a variant, got {rounds=}, {len(chosen)} variants")
    unknown = [step for step in steps if step not in STEPS]
    if unknown or not steps:
        raise ValueError(f"steps must be some of {sorted(STEPS)}, not {list(steps)}")
    started = list(start_order) if start_order is not None else list(chosen)
    if sorted(started) != sorted(chosen):
        raise ValueError(f"start_order must name each variant once: {started} for {list(chosen)}")
    by_start = {name: _Child(name, chosen[name], size, steps) for name in started}
    children = {name: by_start[name] for name in chosen}
    order = [(name, step) for name in children for step in steps]
    times: dict[tuple[str, str], list[float]] = {pair: [] for pair in order}
    try:
        for child in children.values():
            child.reply()  # ready: warmed up, and profiled if it was to be
        for done in range(rounds):
            for name, step in order if done % 2 == 0 else reversed(order):
                children[name].send(f"block {step}")
                times[name, step].append(float(children[name].reply()["step_s"]))
    finally:
        killed = _stop_all(children)
    timings = {
        probe_key(name, step): Timing(tuple(values), warmup=1, calls_per_run=size.steps_per_block)
        for (name, step), values in times.items()
    }
    clock = "perf_counter around a synchronised block, in each child process"
    comparison = Comparison(timings, next(iter(timings)), rounds, clock)
    return ProbeResult(comparison, tuple(children), tuple(steps), tuple(killed))


# ---------------------------------------------------------------------------- the child


def _child(argv: Sequence[str]) -> None:
    """A child: build the steps, warm up, profile if asked, then time blocks on request."""
    parser = argparse.ArgumentParser(prog="cupti_probe child")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--profile-steps", type=int, default=0)
    parser.add_argument("--profile", action="store_true", help="run --profile-steps profiled")
    parser.add_argument("--timed", default="model", help="comma-separated names from STEPS")
    parser.add_argument("--compile", action="store_true", help="compile the augmentation")
    args = parser.parse_args(argv)
    timed = args.timed.split(",")

    import torch
    import torch.nn.functional as F

    from jupyter_gpu.measure import synchronize
    from jupyter_gpu.tutorials.digits import DigitsCNN, load_digits_splits
    from jupyter_gpu.tutorials.pipeline import RawDigitBatches, augment_on_device

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if not cuda:
        torch.set_num_threads(1)  # the children take turns; one thread each keeps them alike
    torch.manual_seed(0)
    model: Any = DigitsCNN(args.width).to(device)
    model.to(memory_format=torch.channels_last)  # torch's stubs omit memory_format
    optimizer = torch.optim.AdamW(model.parameters(), fused=cuda)
    amp = cuda and torch.cuda.is_bf16_supported()
    reused_x = torch.randn(args.batch, 1, args.size, args.size, device=device)
    reused_y = torch.randint(0, 10, (args.batch,), device=device)
    # Notebook 04's section 5: raw batches, pinned on a GPU, copied without blocking, augmented.
    raw = (
        RawDigitBatches(load_digits_splits()[0], args.batch, pin=cuda)
        if "pipeline" in timed
        else None
    )

    def train(x: Any, y: Any) -> None:
        x = x.to(memory_format=torch.channels_last)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            loss: Any = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def augment_eager(x: Any) -> Any:
        return augment_on_device(x, args.size)

    augment: Any = augment_eager
    if args.compile:
        from torch._inductor import config as inductor_config

        # In this process: Inductor's pool of compile workers, starting beside a timing, slowed
        # every step that prepared a batch on the CPU (benchmarks/gpu_augmentation.py). The
        # compile itself happens in the warm-up below.
        inductor_config.compile_threads = 1
        augment = torch.compile(augment_eager)

    def pipeline_step() -> None:
        assert raw is not None
        x, y = next(raw)
        x, y = x.to(device, non_blocking=cuda), y.to(device, non_blocking=cuda)
        train(augment(x), y)

    steps = {"model": lambda: train(reused_x, reused_y), "pipeline": pipeline_step}
    for name in timed:
        for _ in range(5):
            steps[name]()
    # Every child runs the same steps before it is timed, under the profiler or not, so that
    # the children differ in the profile alone.
    recording: Any = contextlib.nullcontext()
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        recording = profile(activities=activities)
    with recording:
        for name in timed:
            for _ in range(args.profile_steps):
                steps[name]()
        synchronize(device)  # inside the profile, so that it records the last kernels
    _say({"ready": True})
    for line in sys.stdin:
        command, _, name = line.strip().partition(" ")
        if command != "block" or name not in steps:
            break
        synchronize(device)
        start = time.perf_counter()
        for _ in range(args.steps):
            steps[name]()
        synchronize(device)
        _say({"step_s": (time.perf_counter() - start) / args.steps})


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(MARK + json.dumps(message) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":  # pragma: no cover - run as a child process by measure()
    if sys.argv[1:2] != ["child"]:
        sys.exit("usage: python -m jupyter_gpu.tutorials.cupti_probe child [options]")
    _child(sys.argv[2:])
