"""From the step as measured to the fixes to try, in order, each with why it is not tried.

The order puts the cheap fixes that touch the largest measured shares first and the compiles
last (each costs its compile time): the input pipeline, TF32, autocast, autocast with
channels_last (for convolution nets: an alternative to each alone, tried early enough to fit a
typical budget), the optimizer, the convolution formats, CPU threads, a larger batch (``--batch
NAME``: measured and suggested, never stacked), then ``torch.compile`` in its default mode,
``reduce-overhead`` where the step is launch-bound, and ``max-autotune-no-cudagraphs`` where the
budget allows.
``--only``/``--skip`` take the families (``loader``, ``precision``, ``optimizer``, ``conv``,
``threads``, ``compile``, ``batch``) or single fixes (``tf32``, ``autocast``, ``channels_last``,
``cudnn``, ``autocast_channels_last``: in both the precision and the conv families).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .autocast_nhwc import AutocastChannelsLast
from .batch_size import LargerBatch
from .compile import Compile
from .conv import ChannelsLast, CudnnBenchmark
from .loader import Loader
from .optimizer import FusedOptimizer
from .precision import Autocast, Tf32
from .threads import Threads

if TYPE_CHECKING:
    from .evidence import Evidence
    from .fixes import Fix, TuneSession

#: The words ``--only`` and ``--skip`` take: families, and the fixes in them.
FAMILIES: dict[str, tuple[str, ...]] = {
    "loader": ("loader",),
    "precision": ("tf32", "autocast", "autocast_channels_last"),
    "optimizer": ("optimizer",),
    "conv": ("channels_last", "cudnn", "autocast_channels_last"),
    "threads": ("threads",),
    "compile": ("compile",),
    "batch": ("batch",),
}
#: Each once (16-bit autocast with channels_last is in both families it joins).
KEYS = tuple(dict.fromkeys(k for keys in FAMILIES.values() for k in keys))


def selection(only: str | None, skip: str | None) -> set[str]:
    """The fix keys to try, from ``--only`` and ``--skip`` (comma-separated words).

    Raises:
        argparse.ArgumentTypeError: an unknown word (the message lists the known ones).
    """

    def words(text: str, option: str) -> set[str]:
        out: set[str] = set()
        for word in (w.strip().lower().replace("-", "_") for w in text.split(",")):
            if not word:
                continue
            if word in FAMILIES:
                out |= set(FAMILIES[word])
            elif word in KEYS:
                out.add(word)
            else:
                known = ", ".join([*FAMILIES, *(k for k in KEYS if k not in FAMILIES)])
                raise argparse.ArgumentTypeError(
                    f"{option} {text}: {word!r} is not a fix; use a comma-separated list of {known}"
                )
        return out

    chosen = words(only, "--only") if only else set(KEYS)
    if skip:
        chosen -= words(skip, "--skip")
    return chosen


@dataclass
class Planned:
    """A fix, and the one line that says why it is not tried (``None``: it is tried)."""

    fix: Fix
    why_not: str | None


def make_plan(s: TuneSession, ev: Evidence, chosen: set[str]) -> list[Planned]:
    """The fixes in the order they are tried (see the module doc)."""
    t = s.target
    loader = Loader()
    optimizer = FusedOptimizer.for_optimizer(t.optimizer)
    channels = ChannelsLast()
    threads = Threads(ev.cpus.usable if ev.cpus is not None else ev.threads)
    larger = LargerBatch()
    autocast = Autocast.for_device(t.device)
    nhwc = AutocastChannelsLast(autocast.dtype, t.device)
    compiled_unused = s.not_by_name(t.model_name, "the compiled model")
    rebuilt_unused = (
        s.not_by_name(t.optimizer_name, f"a {optimizer.how} rebuild of it")
        if t.optimizer_name
        else None
    )
    planned = [
        Planned(loader, loader.explain_skip(s, ev)),
        *(Planned(fix, fix.why_not(ev)) for fix in (Tf32(), autocast)),
        # Right after autocast alone: early enough to be reached within a typical budget.
        Planned(nhwc, nhwc.explain_skip(t.model, ev)),
        Planned(optimizer, optimizer.explain_skip(t.optimizer) or rebuilt_unused),
        Planned(channels, channels.explain_skip(t.model, ev)),
        *(Planned(fix, fix.why_not(ev)) for fix in (CudnnBenchmark(), threads)),
        Planned(larger, larger.explain_skip(s, ev)),
        *(
            Planned(fix, fix.why_not(ev) or compiled_unused)
            for fix in (
                Compile("default"),
                Compile("reduce-overhead"),
                Compile("max-autotune-no-cudagraphs"),
            )
        ),
    ]
    for p in planned:
        if p.why_not is None and p.fix.key not in chosen:
            p.why_not = "left out (--only/--skip)"
    return planned
