"""Do our ratios agree with a peer's? ``jupyter_gpu.measure.compare`` beside torch.utils.benchmark.

Every speed-up the project prints (``%compile --bench``, ``%amp compare``, ``%tune``, the
notebooks) comes from one timing method, ``jupyter_gpu.measure.compare``: blocks of calls,
CUDA events, the variants interleaved round by round, a median of paired ratios with its
interval. This times the same pairs of callables, in the same process, with PyTorch's own
runner as well (``torch.utils.benchmark.Timer.blocked_autorange``: blocks of calls, a clock that
synchronises the device before each reading) and prints both ratios:

- **matmul**: one square product in the wider dtype against the narrower (GPU: fp32 with TF32
  off against bf16; CPU: fp64 against fp32), a ratio far from 1 that both should find;
- **gpt**: a GPT forward (``jupyter_gpu.tutorials.gpt``; bf16 autocast on a GPU), eager against
  ``torch.compile``, the pair the GPU check of ``%compile --bench`` times;
- **self**: the eager forward against itself, which both should put at 1.

The peer is run as fairly as it can be: on all of torch's threads (its default is one), its two
callables alternated ``--pairs`` times (A B, B A, ...), each ``blocked_autorange`` given about as
long as ours takes per variant; its ratio is the median over the pairs of A's median over B's,
with the pairs' range beside it. They agree when the peer's ratio lies inside our interval
widened by ``--tolerance`` on each side: the two runs come one after the other, so a machine that
drifts between them moves one and not the other, and the widening allows for that much. Where
either run saw the machine unsteady (the SM clock moving, another process), the pair is printed
and not judged, whether the two agree or not: on one H100 the matmul pair read 16.0 ours against
13.1 the peer's, the peer's long blocks of bf16 having pulled the SM clock down to 1,350 MHz where
ours, alternating short blocks of fp32 and bf16, kept it above 1,725 (each run said so beside its
figure). So is a pair whose peer disagrees with itself, its pairs spread wider than the tolerance
twice over: on the same H100 the forward against itself read 0.817 by the peer (pairs
0.584-1.000), a call against itself, with NVML's clock steady, where ours read 0.994
(0.960-1.136).

    python benchmarks/timing_peer.py                      # the GPU when there is one, else CPU
    python benchmarks/timing_peer.py --device cpu --only matmul,self --seconds 2

Exit status 0 when no pair disagrees on a steady machine and one at least agrees; 1 when one
disagrees; 2 when none could be judged.
With ``$OUT`` (or ``$JUPYTER_GPU_OUT``) set, the figures also go to ``timing_peer.json`` there.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from typing import Any

import torch

from benchmarks.outputs import write_json
from jupyter_gpu.measure import Ratio, compare
from jupyter_gpu.measure.machine import MachineWatch, cuda_probe
from jupyter_gpu.tutorials.gpt import GPT, GPTConfig

WORKLOADS = ("matmul", "gpt", "self")


@dataclass(frozen=True)
class PeerRatio:
    """torch.utils.benchmark's ratio of a baseline's time to a variant's (above 1: faster)."""

    #: The median over the pairs of the baseline's median over the variant's.
    value: float
    #: The smallest and largest pair's ratio.
    low: float
    high: float
    pairs: int
    #: The medians of the baseline's and the variant's per-call times (seconds).
    baseline_s: float
    variant_s: float

    def can_judge(self, tolerance: float) -> bool:
        """Whether its own pairs agree within twice ``tolerance``: else it cannot arbitrate."""
        return self.high / self.low <= 1 + 2 * tolerance

    def agrees_with(self, ours: Ratio, tolerance: float) -> bool:
        """Whether this ratio lies inside ``ours``'s interval widened by ``tolerance`` a side."""
        return ours.low * (1 - tolerance) <= self.value <= ours.high * (1 + tolerance)


def peer_ratio(
    baseline: Callable[[], object],
    variant: Callable[[], object],
    *,
    pairs: int = 4,
    min_run_time: float = 0.5,
    between: Callable[[], None] = lambda: None,
) -> PeerRatio:
    """Time both callables with ``blocked_autorange``, alternated ``pairs`` times.

    On all of torch's threads: ``Timer``'s default of one thread would time a different
    program than ``compare`` does on a CPU. ``between`` is called after each measurement (a
    machine watch's tick).
    """
    from torch.utils import benchmark

    threads = torch.get_num_threads()
    timers = [
        benchmark.Timer("f()", globals={"f": f}, num_threads=threads) for f in (baseline, variant)
    ]
    ratios: list[float] = []
    medians: tuple[list[float], list[float]] = ([], [])
    for i in range(pairs):
        order = (0, 1) if i % 2 == 0 else (1, 0)
        got = {}
        for k in order:
            got[k] = timers[k].blocked_autorange(min_run_time=min_run_time).median
            between()
        medians[0].append(got[0])
        medians[1].append(got[1])
        ratios.append(got[0] / got[1])
    return PeerRatio(
        value=statistics.median(ratios),
        low=min(ratios),
        high=max(ratios),
        pairs=pairs,
        baseline_s=statistics.median(medians[0]),
        variant_s=statistics.median(medians[1]),
    )


def no_grad_forward(
    net: Callable[[torch.Tensor], torch.Tensor],
    idx: torch.Tensor,
    precision: Callable[[], AbstractContextManager[object]],
) -> Callable[[], object]:
    """A call of ``net(idx)`` without autograd, under a fresh ``precision()`` each call."""

    def run() -> object:
        with torch.no_grad(), precision():
            return net(idx)

    return run


def workloads(
    device: torch.device, only: set[str]
) -> dict[str, tuple[str, Callable[[], object], Callable[[], object]]]:
    """name -> (what it compares, the baseline, the variant), for the names in ``only``."""
    gpu = device.type == "cuda"
    chosen: dict[str, tuple[str, Callable[[], object], Callable[[], object]]] = {}
    if "matmul" in only:
        n = 4096 if gpu else 384
        wide, narrow = (torch.float32, torch.bfloat16) if gpu else (torch.float64, torch.float32)
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 here (main puts it back)
        a, b = (torch.randn(n, n, device=device, dtype=wide) for _ in range(2))
        a2, b2 = a.to(narrow), b.to(narrow)
        chosen["matmul"] = (
            f"{n}^3 product, {str(wide)[6:]} vs {str(narrow)[6:]}",
            lambda: a @ b,
            lambda: a2 @ b2,
        )
    if only & {"gpt", "self"}:
        config = (
            GPTConfig(context=256, n_layer=6, n_head=8, d_model=512)
            if gpu
            else GPTConfig(context=64, n_layer=2, n_head=4, d_model=128)
        )
        torch.manual_seed(0)
        model = GPT(config).to(device).eval()
        idx = torch.randint(0, config.vocab_size, (32 if gpu else 4, config.context), device=device)

        def forward(net: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], object]:
            bf16 = functools.partial(torch.autocast, "cuda", torch.bfloat16)
            return no_grad_forward(net, idx, bf16 if gpu else contextlib.nullcontext)

        what = f"GPT forward ({config.describe()}{', bf16' if gpu else ''})"
        if "gpt" in only:
            chosen["gpt"] = (
                f"{what}, eager vs torch.compile",
                forward(model),
                forward(torch.compile(model)),
            )
        if "self" in only:
            chosen["self"] = (f"{what}, eager vs itself", forward(model), forward(model))
    return chosen


def judge(
    key: str,
    what: str,
    baseline: Callable[[], object],
    variant: Callable[[], object],
    device: torch.device,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One pair timed both ways, printed, and its row for the JSON."""
    for f in (baseline, variant):  # compiles and first calls before either clock starts
        f()
    started = time.monotonic()
    c = compare({"baseline": baseline, "variant": variant}, device=device, target_s=args.seconds)
    ours = c.ratio("variant")
    watch = MachineWatch(cuda_probe(device.index) if device.type == "cuda" else None)
    peer = peer_ratio(
        baseline,
        variant,
        pairs=args.pairs,
        min_run_time=max(0.2, args.seconds / 2 / args.pairs),
        between=watch.tick,
    )
    peer_notes = watch.stop().notes
    if not peer.can_judge(args.tolerance):
        peer_notes += (f"its own pairs spread {peer.low:.3f}-{peer.high:.3f}",)
    # judged only on a steady machine: there an agreement counts as much as a disagreement
    steady = not (c.machine.notes or peer_notes)
    agrees = steady and peer.agrees_with(ours, args.tolerance)
    verdict = "agree" if agrees else "DISAGREE" if steady else "not judged: not steady"
    machine = "; ".join(c.machine.notes) or "steady"
    peer_machine = "; ".join(peer_notes) or "steady"
    print(
        f"{key:7} {what}\n"
        f"        ours  {ours.value:.3f} ({ours.low:.3f}-{ours.high:.3f}; {ours.how_sure()}), "
        f"baseline {c['baseline'].median_s * 1e3:.3f} ms, machine: {machine}\n"
        f"        peer  {peer.value:.3f} (pairs {peer.low:.3f}-{peer.high:.3f}, {peer.pairs}), "
        f"baseline {peer.baseline_s * 1e3:.3f} ms, machine: {peer_machine}\n"
        f"        {verdict} (tolerance {args.tolerance:.0%} a side; "
        f"{time.monotonic() - started:.0f} s)",
        flush=True,
    )
    return {
        "workload": key,
        "what": what,
        "ours": asdict(ours),
        "peer": asdict(peer),
        "agree": agrees,
        "steady": steady,
        "machine": c.machine.notes,
        "peer_machine": peer_notes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--only", default=",".join(WORKLOADS), help="workloads, comma-separated")
    parser.add_argument("--seconds", type=float, default=4.0, help="timed rounds per comparison")
    parser.add_argument("--pairs", type=int, default=4, help="the peer's alternations")
    parser.add_argument("--tolerance", type=float, default=0.05, help="widening a side (0.05)")
    args = parser.parse_args(argv)
    only = {w.strip() for w in args.only.split(",") if w.strip()}
    if not only <= set(WORKLOADS):
        parser.error(f"--only takes {', '.join(WORKLOADS)}, not {', '.join(only - set(WORKLOADS))}")
    device = torch.device(args.device)
    if args.device == "cuda":  # an index: the machine watch reads that GPU
        device = torch.device("cuda", torch.cuda.current_device())
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"{name}, torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)

    tf32 = torch.backends.cuda.matmul.allow_tf32  # the matmul pair turns TF32 off
    try:
        rows = [judge(key, *pair, device, args) for key, pair in workloads(device, only).items()]
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    write_json("timing_peer.json", {"device": name, "torch": torch.__version__, "rows": rows})
    agreed = sum(r["agree"] for r in rows)
    disagreed = sum(not r["agree"] and r["steady"] for r in rows)
    unsteady = len(rows) - agreed - disagreed
    print(
        f"{agreed} of {len(rows)} pairs agree, {disagreed} disagree on a steady machine"
        + (f", {unsteady} not judged (the machine was not steady)" if unsteady else "")
    )
    return 0 if not disagreed and agreed else 1 if disagreed else 2


if __name__ == "__main__":
    sys.exit(main())
