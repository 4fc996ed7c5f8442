"""The one timing method: variants interleaved in rounds, each ratio with its interval.

Every comparison the project prints goes through :func:`compare`: ``%compile --bench`` (eager
against compiled), ``%amp compare`` (the precisions), ``%tune`` (each fix against the step as it
was), the tutorials' timers and ``benchmarks/``. How it times:

1. **Warm-up.** Each variant runs ``warmup`` times, in order; the last warm-up call of each is
   timed to size its blocks.
2. **Blocks.** A variant is timed a *block* at a time: ``calls`` calls queued back to back, as a
   training loop runs them, between two synchronisations; the block lasts about ``block_s`` (at
   least one call), so the clock's own cost and resolution are small beside it. This is
   ``torch.utils.benchmark``'s ``blocked_autorange`` idea, kept; its per-variant blocks of
   measurements, one variant after the other, are not (see 3).
3. **Rounds.** Each round times one block of every variant, the order reversed every other round
   (A B, B A, A B...), so drift (a clock that drops, a neighbour's job, a cache that warms)
   falls on both sides alike; a block of A followed by a block of B is what made one bench say
   1.13x, 1.28x and 1.30x on the same step.
4. **Clock.** CUDA events on a GPU (on the current stream, read after a synchronise, so the
   time is the GPU stream's to the block's last kernel), started behind one untimed lead-in
   call, so that the GPU's queue is full when the clock starts, as in a training loop's steady
   state (a clock started on an idle GPU also timed the host preparing the first call: on one
   H100, in blocks of two calls, a 2 ms kernel after 1 ms of host work read 1.27x slower than
   the same kernel at once, and 1.00x behind the lead-in; ``tests/gpu/test_compare_gpu.py``);
   ``perf_counter`` around a synchronised block on the CPU, where the host's time is the
   step's. ``benchmarks/timing_peer.py`` compares the ratios with ``torch.utils.benchmark``'s.
5. **Ratio.** Round ``i`` pairs the variants' per-call times; a ratio is the median of the
   paired ratios, with the order-statistic interval for that median taken over the medians of
   stretches of consecutive rounds (``interval.py``: neighbouring rounds share the machine's
   state, so single rounds would make it too narrow). An interval that holds 1.0 is "no
   measurable difference".
6. **The machine.** Whether it stayed steady (SM clock, other GPU processes, CPU load) is read
   while the rounds run (``machine.py``) and said beside the figures.
7. **Our own background work waits.** ``%compile``'s walk of the compile caches stops, between two
   directories, while this times (``quiet.py``): beside the rounds it made the calls it timed
   2.1-2.5x as long on a 2-core VM.

torch is imported only when a GPU is used; the CPU path needs none of it.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any

from .interval import LEVEL, Ratio, paired_ratio
from .machine import GpuProbe, MachineNotes, MachineWatch, cuda_probe, pace_note
from .quiet import timing_in_progress
from .timing import Timing, time_first_call

#: The length a timed block aims for (seconds): long beside the clock's cost, short beside drift.
BLOCK_S = 0.01
#: Fewest rounds: 6 is the fewest whose order-statistic interval reaches 95 %.
MIN_ROUNDS = 8


@dataclass(frozen=True)
class Variant:
    """One way to run the step, and what to set around it.

    Args:
        run: one call of the step.
        context: entered before each of the variant's blocks and left after it, untimed (a
            precision mode, a swapped model); ``None`` for none.
    """

    run: Callable[[], object]
    context: Callable[[], AbstractContextManager[object]] | None = None

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
        if self.context is None:
            yield
            return
        with self.context():
            yield


@dataclass(frozen=True)
class Comparison(Mapping[str, Timing]):
    """Per-call times of each variant, round by round, and how they were taken.

    A mapping of variant names to their :class:`Timing` (one per-call time per round):
    ``comparison["eager"]``; :meth:`ratio` pairs two of them.
    """

    timings: Mapping[str, Timing]
    baseline: str
    rounds: int
    clock: str
    machine: MachineNotes = field(default_factory=MachineNotes)
    level: float = LEVEL
    #: Each block ran after an untimed lead-in call (CUDA; see the module doc, 4).
    lead_in: bool = False

    def __getitem__(self, name: str) -> Timing:
        return self.timings[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.timings)

    def __len__(self) -> int:
        return len(self.timings)

    def ratio(self, variant: str, baseline: str | None = None) -> Ratio:
        """How many times longer ``baseline`` (default: the comparison's) took than ``variant``.

        Raises:
            KeyError: for a name that was not compared.
        """
        base = baseline or self.baseline
        return paired_ratio(
            list(self.timings[base].times_s),
            list(self.timings[variant].times_s),
            level=self.level,
            variant=variant,
            baseline=base,
        )

    def ratios(self) -> dict[str, Ratio]:
        """Every other variant against the baseline, in order."""
        return {name: self.ratio(name) for name in self.timings if name != self.baseline}

    def method(self) -> str:
        """One sentence: how the figures were taken (for a report's footnote)."""
        blocks = sorted({t.calls_per_run for t in self.timings.values()})
        calls = (
            f"{blocks[0]:,} call(s)"
            if len(blocks) == 1
            else f"{blocks[0]:,} to {blocks[-1]:,} calls"
        )
        lead_in = ", after an untimed lead-in call" if self.lead_in else ""
        return (
            f"{self.rounds} rounds, each timing every variant once (the order alternating), a "
            f"block of {calls} back to back per variant and round{lead_in}, with {self.clock}; "
            "ratios are medians of the rounds' paired ratios, with their interval (the level "
            "beside each) over the medians of stretches of consecutive rounds"
        )


def _cuda_device(device: Any) -> int | None:
    """The CUDA device index to time on, or ``None`` for the CPU clock."""
    if device is None:
        loaded = sys.modules.get("torch")
        if loaded is None or not loaded.cuda.is_available() or not loaded.cuda.is_initialized():
            return None
        return int(loaded.cuda.current_device())
    import torch

    dev = torch.device(device)
    if dev.type != "cuda":
        return None
    return dev.index if dev.index is not None else int(torch.cuda.current_device())


class _Clock:
    """Times one block of calls: CUDA events on ``cuda`` (an index), else ``perf_counter``.

    ``lead_in``: on CUDA, each block runs one untimed call before its clock starts.
    """

    def __init__(self, cuda: int | None, lead_in: bool) -> None:
        self.cuda = cuda
        self.lead_in = lead_in and cuda is not None
        self.name = "CUDA events" if cuda is not None else "perf_counter"
        self._events: tuple[Any, Any] | None = None
        if cuda is not None:
            import torch

            with torch.cuda.device(cuda):
                self._events = (
                    torch.cuda.Event(enable_timing=True),  # type: ignore[no-untyped-call]  # torch leaves it untyped
                    torch.cuda.Event(enable_timing=True),  # type: ignore[no-untyped-call]
                )

    def block(self, run: Callable[[], object], calls: int) -> float:
        """Seconds per call over ``calls`` calls queued back to back (after a lead-in call)."""
        if self._events is None:
            start = time.perf_counter()
            for _ in range(calls):
                run()
            return (time.perf_counter() - start) / calls
        import torch

        begin, end = self._events
        torch.cuda.synchronize(self.cuda)
        # An untimed lead-in call first. After the synchronisation the GPU is idle, and a clock
        # started then would also time the host preparing the first call (a compiled call's
        # guards, a step's Python), which a training loop hides behind the GPU's work (the
        # module doc, 4, has the H100's figures). Queued behind the lead-in's work, ``begin``
        # starts the clock with the queue full, as in the steady state of a loop.
        if self.lead_in:
            run()
        begin.record()
        for _ in range(calls):
            run()
        end.record()
        torch.cuda.synchronize(self.cuda)  # the whole device: work on other streams too
        return float(begin.elapsed_time(end)) / 1e3 / calls


@timing_in_progress()  # our own background work (the compile-cache walk) waits meanwhile: quiet.py
def compare(
    variants: Mapping[str, Callable[[], object] | Variant],
    *,
    baseline: str | None = None,
    device: Any = None,
    warmup: int = 2,
    rounds: int | None = None,
    target_s: float = 2.0,
    min_rounds: int = MIN_ROUNDS,
    max_rounds: int = 100,
    block_s: float = BLOCK_S,
    calls: int | None = None,
    max_calls: int = 1000,
    watch: bool = True,
    probe: GpuProbe | None = None,
    on_round: Callable[[int, int], None] | None = None,
    lead_in: bool = True,
) -> Comparison:
    """Time ``variants`` interleaved in rounds (the module doc says how).

    Args:
        variants: name -> a call of the step (or a :class:`Variant` with a context), in order.
        baseline: the name ratios are taken against (default: the first).
        device: where the step runs: a CUDA device times with CUDA events; ``None`` means the
            current CUDA device if this process already uses CUDA, else the CPU.
        warmup: untimed calls of each variant first (at least 1: the last sizes the blocks).
        rounds: how many rounds; default: rounds (in pairs) until ``target_s`` seconds have
            passed, at least ``min_rounds`` and at most ``max_rounds``.
        target_s: about how long the timed rounds take, all variants together.
        min_rounds: fewest rounds when they stop on time (6 or more reach a 95 % interval).
        max_rounds: most rounds when they stop on time.
        block_s: about how long one block lasts (``calls`` per block follows from it).
        calls: calls per block, the same for every variant (default: sized per variant).
        max_calls: most calls in one block.
        watch: read the machine's steadiness while timing (GPU clock and processes, CPU load).
        probe: the GPU probe to use (tests); default: NVML's, for the CUDA device.
        on_round: called as ``on_round(done, most)`` after each round (a progress bar; ``most``
            is ``rounds``, or ``max_rounds`` when the rounds stop on time).
        lead_in: on a GPU, start each block's clock behind one untimed call (the module doc,
            4); ``False`` where a block's start is part of what it compares.

    Raises:
        ValueError: for no variants, an unknown baseline, ``warmup`` < 1 or ``rounds`` < 1.
    """
    named = {n: v if isinstance(v, Variant) else Variant(v) for n, v in variants.items()}
    if not named:
        raise ValueError("nothing to compare")
    base = baseline or next(iter(named))
    if base not in named:
        raise ValueError(f"baseline {base!r} is not one of {', '.join(named)}")
    if warmup < 1 or (rounds is not None and rounds < 1) or (calls is not None and calls < 1):
        raise ValueError(f"need warmup, rounds and calls >= 1, got {warmup=}, {rounds=}, {calls=}")
    cuda = _cuda_device(device)
    clock = _Clock(cuda, lead_in)
    # The last warm-up call, synchronised and timed on its own, sizes the blocks.
    one_call_device = f"cuda:{cuda}" if cuda is not None else None
    estimate: dict[str, float] = {}
    for name, variant in named.items():
        with variant.entered():
            for _ in range(warmup - 1):
                variant.run()
            estimate[name] = max(time_first_call(variant.run, device=one_call_device), 1e-9)
    per_block = {
        n: calls or max(1, min(max_calls, math.ceil(block_s / e))) for n, e in estimate.items()
    }
    gpu = probe if probe is not None else (cuda_probe(cuda) if watch and cuda is not None else None)
    machine = MachineWatch(gpu) if watch else None
    times: dict[str, list[float]] = {n: [] for n in named}
    order = list(named)
    # Without a fixed count, rounds go on until ``target_s`` has passed (by the clock, not the
    # warm-up's estimate: a loaded machine can make calls 30 times slower than the warm-up
    # said), in pairs so that each order comes as often, within the bounds.
    planned = rounds if rounds is not None else max_rounds
    started = time.monotonic()
    done = 0
    try:
        while done < planned:
            for name in order if done % 2 == 0 else reversed(order):
                variant = named[name]
                with variant.entered():
                    times[name].append(clock.block(variant.run, per_block[name]))
            done += 1
            if machine is not None:
                machine.tick()
            if on_round is not None:
                on_round(done, planned)
            if (
                rounds is None
                and done >= min_rounds
                and done % 2 == 0
                and time.monotonic() - started >= target_s
            ):
                break
    finally:
        notes = machine.stop() if machine is not None else MachineNotes()
    pace = pace_note(times) if watch else None
    if pace is not None:
        notes = replace(notes, notes=(*notes.notes, pace))
    return Comparison(
        {n: Timing(tuple(times[n]), warmup, per_block[n]) for n in named},
        base,
        done,
        clock.name,
        notes,
        lead_in=clock.lead_in,
    )
