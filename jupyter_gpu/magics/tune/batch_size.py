"""The larger batch (``--batch NAME``): tried and measured per sample, suggested, never applied.

A larger batch changes what a step trains on: the loss averages over more samples and the
learning rate usually grows with the batch (Goyal et al., "Accurate, Large Minibatch SGD",
arXiv:1706.02677, the linear scaling rule). So it is a suggestion, not a fix %tune stacks or
applies; with ``--batch NAME`` (the variable holding the batch size) it is tried, so that the
suggestion carries a measured figure:

- the size: on CUDA the batch the free memory allows from the first step's peak
  (:func:`headroom_factor`: the activations grow with the batch, the weights and optimizer
  state do not), at most :data:`MAX_FACTOR` times the batch in one try; on a CPU twice the
  batch (the host's memory is not measured against the batch);
- how: NAME is bound to the larger size while the step runs with it, and the loader the step
  draws from, where its ``batch_size`` is NAME's value, is rebuilt with the larger batch (the
  same dataset, sampler, collate function and worker settings);
- on top of the fixes kept before it (``kept.py``), like the others: a larger batch on the tuned
  step is what the suggestion is about. Where the input pipeline is among them, its new loader
  (workers, pinned memory, prefetching) is the one rebuilt with the larger batch, so that both
  sides of the comparison are fed the same way (rebuilt from the user's loader, the larger batch
  would be fed by the loader without workers against a kept fixes' side fed by workers), and its
  timed blocks hold as many of its batches as the kept fixes' hold of theirs;
- the figure: per sample. ``compare`` times the kept fixes against the kept fixes with the
  larger batch, a call each; a call of the larger batch does ``new / old`` as many samples, so
  the samples-per-second ratio is the time ratio times ``new / old`` (its interval too).

The loss is not compared (it averages over other samples); on CUDA the first step's peak is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from jupyter_gpu.magics.output.render import fmt_bytes

from .batches import rebuilt, shut_down
from .fixes import Fix
from .loader import Loader

if TYPE_CHECKING:
    from .evidence import Evidence
    from .fixes import TuneSession

#: The most a batch is grown in one try: the activations' growth with the batch is an estimate.
MAX_FACTOR = 4
#: On a CPU: twice the batch.
CPU_FACTOR = 2
#: What is left free for a larger batch: a margin for fragmentation and workspaces.
HEADROOM_USE = 0.9


def headroom_factor(ev: Evidence) -> float | None:
    """How many times the batch the free memory holds, from the first step's peak (CUDA).

    ``(peak + HEADROOM_USE * free) / peak``, where ``peak`` is the first step's allocator peak
    above the memory in use before it (the activations and gradients a step makes) and ``free``
    the device's free memory plus torch's unused cache. ``None`` without those figures.
    """
    peak, free = ev.first.peak_bytes, ev.free_bytes
    if not ev.cuda or not peak or free is None or peak <= 0:
        return None
    return (peak + HEADROOM_USE * free) / peak


class LargerBatch(Fix):
    """The step with a larger batch (see the module doc)."""

    name = "a larger batch"
    family = "batch"
    key = "batch"
    order = 70
    stacks = False
    compares_loss = False

    def __init__(self) -> None:
        self.size: int | None = None
        self.new_size: int | None = None
        self.loader: Any = None

    def explain_skip(self, s: TuneSession, ev: Evidence) -> str | None:
        """Why not on this step (``None``: try it, at :attr:`new_size`)."""
        t = s.target
        if t.batch_name is None or t.batch_size is None:
            return (
                "no --batch NAME (the variable holding the batch size): %tune tries a larger "
                "batch only when told where the batch size is"
            )
        size = t.batch_size
        if ev.cuda:
            factor = headroom_factor(ev)
            if factor is None:
                return "no figure for the first step's peak or the free memory"
            new = min(MAX_FACTOR * size, int(size * factor))
            if new < size * 1.25:
                free = fmt_bytes(ev.free_bytes) if ev.free_bytes is not None else "n/a"
                return (
                    f"the free memory ({free}) holds a batch of {new} at most, from the first "
                    f"step's peak of {fmt_bytes(ev.first.peak_bytes or 0)} for {size}"
                )
        else:
            new = CPU_FACTOR * size
        self.size, self.new_size = size, new
        self.name = f"batch {new} (from {size}), per sample"
        return None

    def samples_per_call(self, s: TuneSession) -> float:
        """``new / old``; 1 where a call is an epoch (``--loader`` alone: the same samples)."""
        if self.size is None or self.new_size is None or s.target.epoch_mode:
            return 1.0
        return self.new_size / self.size

    def prepare(self, s: TuneSession) -> None:
        t = s.target
        if self.loader is None and t.loader is not None and t.loader.batch_size == self.size:
            self.loader = rebuilt(_feeding(s), batch_size=self.new_size)

    def cost_s(
        self, ev: Evidence, seconds: float, rounds: int, step_s: float | None = None
    ) -> float:
        """The step's cost at both sizes (a step's time grows about with the batch)."""
        k = (self.new_size or 1) / (self.size or 1)
        per_round = (ev.step_s if step_s is None else step_s) * (1 + k)
        return max(seconds, rounds * per_round) + (self.warmup + 2) * per_round + 2.0

    def block_s(self, s: TuneSession) -> float | None:
        """The kept fixes' blocks (ten of their loader's batches), times ``new / old``.

        Each of its blocks starts a fresh epoch of its own loader with a batch drawn ahead
        (``BatchSource.use``): as many of its larger batches a block as the kept fixes' blocks
        hold of theirs, so that its loader's pace shows as theirs does.
        """
        under = [b for f in s.kept.fixes if (b := f.block_s_under(s)) is not None]
        if not under:
            return None
        return max(under) * (self.new_size or 1) / (self.size or 1)

    @contextlib.contextmanager
    def applied(self, s: TuneSession) -> Iterator[None]:
        t = s.target
        assert t.batch_name is not None
        with s.rebound(t.batch_name, self.new_size):
            if self.loader is not None:
                s.draw_from(self.loader)
            yield

    def code(self, s: TuneSession) -> list[str]:
        t = s.target
        times = (self.new_size or 1) / (self.size or 1)
        lines = [
            f"{t.batch_name} = {self.new_size}  # {times:.3g}x the samples a step: scale the "
            "learning rate with it"
        ]
        if self.loader is not None:
            name = t.loader_name or "loader"
            lines.append(f"# and make {name} again with batch_size={t.batch_name}")
        return lines

    def release(self, s: TuneSession) -> None:
        if self.loader is not None:
            shut_down(self.loader)
            self.loader = None


def _feeding(s: TuneSession) -> Any:
    """The loader the kept fixes feed the step from: a kept input pipeline's, or the step's."""
    for fix in s.kept.fixes:
        if isinstance(fix, Loader) and fix.new is not None:
            return fix.new
    return s.target.loader
