"""The input-pipeline fix: a DataLoader that makes batches in worker processes, ahead of the step.

The new loader has the same dataset, sampler (or batch sampler), collate function, batch size
and ``drop_last`` as the step's, and PyTorch's settings for feeding a GPU
(https://pytorch.org/docs/stable/data.html): ``num_workers`` from this kernel's CPU quota, less
one for the training process, at most 8 (``jupyter_gpu.host.cpus.worker_count``, as the
tutorials count them; its sentence says whether the quota or the cap decided),
``pin_memory=True`` on CUDA (page-locked batches, so that ``.to("cuda", non_blocking=True)`` only
queues the copy), ``persistent_workers=True`` (workers
kept between epochs) and ``prefetch_factor=4`` (each worker keeps four batches ready).

Three figures, each said with where it comes from:

- the loader alone: its first batch, then its steady time per batch over at least 16 batches
  and four waves of its workers (and a second), drawing with nothing else running, as it is and
  new; over an epoch shorter than that, both go on into their next epochs (the new loader's
  persistent workers kept: ``batches.time_loader``), and the sentence says how many;
- the step on a fixed batch (no loading at all) against the step as it is: how much of the step
  the loader costs now, the most any loader can win; timed in the same rounds as the speedup
  (``Fix.beside``: a third variant, with the fixes kept before it on, like the other two), so
  that the two figures come from one measurement;
- the speedup itself: the step with the new loader against the step as it is, both drawing real
  batches (interleaved rounds). Each of the new loader's timed blocks starts a fresh epoch, which
  drops what its workers made while the step as it is was timed, and whose first batch is drawn
  before the block is timed (``BatchSource.use``: a block starts as deep in an epoch does, one
  batch ready); blocks last at least ten of the old loader's batches, so that a pipeline that
  cannot keep up shows its own pace.

Kept, it stays under the fixes tried after it (``kept.py``), both sides of their comparisons
drawing from it, its epoch running on from block to block (``Session.variant``), in blocks of at
least ten steps and four waves of its workers (:meth:`Loader.block_s_under`), or of whole
epochs where an epoch is short (:meth:`Loader.calls_under`: each holds its refill). Their first
steps leave it out (``Fix.feeds``). When the kept fixes are timed together, the step with them
on one fixed batch is timed in the same rounds: where the new loader alone makes batches slower
than that, the report says that the new loader now limits the step (:meth:`Loader.limit_note`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from jupyter_gpu.host.cpus import WorkerCount, worker_count
from jupyter_gpu.magics.output.render import fmt_pct
from jupyter_gpu.measure import Comparison, Timing, Variant, fmt_ratio, fmt_seconds
from jupyter_gpu.measure.interval import rounds_interval

from .batches import STEADY_BATCHES, LoaderAlone, rebuilt, shut_down, time_loader, worker_settings
from .evidence import SMALL_SHARE
from .fixes import Fix

if TYPE_CHECKING:
    from .evidence import Evidence
    from .fixes import TuneSession

PREFETCH = 4
#: The name of the variant that draws no batches (one fixed batch, handed out at every call).
FIXED = "one fixed batch"
#: A timed block of the loader comparison lasts at least this many of the old loader's batches.
BLOCK_BATCHES = 10
#: Under another fix, a timed block lasts at least this many waves of the new loader's workers.
WAVES = 4
#: Under another fix, an epoch of the new loader this short (seconds of steps) sets the blocks:
#: whole epochs each (``Loader.calls_under``). Two seconds: a trial's 24 blocks then take 48 s at
#: most; over longer epochs the refills come less often than once in 2 s of blocks.
SHORT_EPOCH_S = 2.0


def new_settings(loader: Any, *, cuda: bool, workers: int) -> dict[str, Any]:
    """The worker settings the new loader gets (see the module doc)."""
    return {
        "num_workers": workers,
        "pin_memory": bool(cuda or loader.pin_memory),
        "persistent_workers": workers > 0,
        "prefetch_factor": PREFETCH if workers > 0 else None,
    }


class Loader(Fix):
    """A new DataLoader with workers, pinned memory, persistent workers and prefetching."""

    name = "input pipeline"
    family = "loader"
    key = "loader"
    order = 5
    source = "the step with the new loader against the step as it is, both drawing real batches"
    feeds = True

    def __init__(self, count: WorkerCount | None = None) -> None:
        #: The worker count and what decided it (the CPU quota less one, or the cap).
        self.count = worker_count() if count is None else count
        self.workers = self.count.workers
        self.new: Any = None
        self.alone: tuple[LoaderAlone, LoaderAlone] | None = None
        #: The first batch of the step as it is, for the variant that loads nothing.
        self.fixed: tuple[Any] | None = None
        #: From its own rounds: the step on the fixed batch, and the step drawing from it.
        self.fixed_timing: Timing | None = None
        self.drawing_timing: Timing | None = None

    def explain_skip(self, s: TuneSession, ev: Evidence) -> str | None:
        """Why not on this step (``None``: try it)."""
        t = s.target
        loader_s = float(getattr(ev.analysis, "loader_s", 0.0) or 0.0)
        if t.loader is None:
            if loader_s > 0:
                return (
                    f"a DataLoader's __next__ took {fmt_pct(ev.loader_share)} of the profiled "
                    "steps, but %tune was not told where the step draws its batches: pass "
                    "--batches NAME (the iterator it calls next() on) or --loader NAME"
                )
            return "the step draws no batches from a DataLoader that %tune was told about"
        if t.loader_note:
            return f"the loader reads {t.loader_note}"
        if t.batches_name is None and t.loader_name is not None:
            # Without --batches, the new loader reaches the step only through the loader's name.
            unused = s.not_by_name(t.loader_name, "the new loader")
            if unused is not None:
                return unused
        if ev.window_s > 0 and ev.loader_share < SMALL_SHARE:
            return (
                f"the DataLoader's __next__ took {fmt_pct(ev.loader_share)} of the profiled "
                "steps: the step does not wait on its batches"
            )
        wanted = new_settings(t.loader, cuda=t.cuda, workers=self.workers)
        now = worker_settings(t.loader)
        if self.workers <= now["num_workers"] and (now["pin_memory"] or not wanted["pin_memory"]):
            if self.workers == 0 and now["num_workers"] == 0:
                return (
                    f"this kernel may use {self.count.budget.describe()}: a worker would take "
                    "turns with the training process on it"
                )
            return (
                f"the loader has {now['num_workers']} workers already (%tune would start "
                f"{self.count.why()})" + (", pinned" if now["pin_memory"] else "")
            )
        return None

    def prepare(self, s: TuneSession) -> None:
        if self.new is None:
            t = s.target
            self.new = rebuilt(
                t.loader, **new_settings(t.loader, cuda=t.cuda, workers=self.workers)
            )

    def measure_more(self, s: TuneSession) -> list[str]:
        """The loader alone (as it is and new); the batch the fixed-batch variant hands out."""
        base_alone = time_loader(s.base_loader)
        new_alone = time_loader(self.new)
        self.alone = (base_alone, new_alone)
        lines = [
            f"the loader alone (no step): as it is, {base_alone.describe()}; with "
            f"{self.workers} worker(s), {new_alone.describe()}"
        ]
        self.fixed = None
        if s.source is not None:
            s.reset()
            with s.as_is():
                s.source.restart()
                self.fixed = (s.source.peek(),)
        return lines

    def on_fixed_batch(self, s: TuneSession, fixes: list[Fix] | tuple[Fix, ...]) -> Variant | None:
        """The step with ``fixes`` on (less this one), handed one fixed batch at every call.

        ``None`` where there is no fixed batch (a step that iterates its loader itself).
        """
        if s.source is None or self.fixed is None:
            return None
        fixed = self.fixed[0]
        others = s.variant([f for f in fixes if f is not self])

        @contextlib.contextmanager
        def one_batch() -> Iterator[None]:
            with others.entered():
                assert s.source is not None
                s.source.use_fixed(fixed)
                yield

        return Variant(others.run, one_batch)

    def beside(self, s: TuneSession) -> dict[str, Variant]:
        """The step on one fixed batch, timed in the same rounds as the speedup.

        The same rounds and blocks as the step with the new loader, so that the two figures are
        set side by side from one measurement (and the step as it is is timed once for both);
        with the fixes kept before it on, as both of those run.
        """
        variant = self.on_fixed_batch(s, s.kept.fixes)
        return {} if variant is None else {FIXED: variant}

    def beside_notes(self, comparison: Comparison) -> list[str]:
        if FIXED not in comparison:
            return []
        self.fixed_timing = comparison[FIXED]
        self.drawing_timing = comparison.timings.get(self.name)
        return [
            "the step on one fixed batch (no loading) against the step drawing from the loader "
            f"as it is, in the same rounds: {comparison.ratio(FIXED).describe()}: what the step "
            "would gain if loading cost nothing, the most a loader can give it"
        ]

    def limit_note(self, fixed: Timing | None, drawing: Timing | None) -> str | None:
        """The line saying that the new loader now limits the step, or ``None``.

        Said where the new loader alone (no step) made its batches more slowly than the step
        with the kept fixes took on one fixed batch (``fixed``: slower than the top of its 95 %
        interval), both measured in this run; ``drawing``: the step with the kept fixes drawing
        from the new loader, from the same rounds. Not said without those figures, or where the
        loader alone was timed short of a steady count.
        """
        if self.alone is None or fixed is None or not fixed.times_s:
            return None
        new = self.alone[1]
        if new.short or new.batches == 0:
            return None
        low, high, level = rounds_interval(list(fixed.times_s))
        if new.per_batch_s <= high:
            return None
        line = (
            f"the new loader now limits the step: alone (no step), with {self.workers} "
            f"worker(s), it made a batch every {fmt_seconds(new.per_batch_s)}, more slowly than "
            f"a step with the kept fixes took on one fixed batch (no loading): "
            f"{fmt_seconds(fixed.median_s)} ({fmt_seconds(low)}-{fmt_seconds(high)}, "
            f"{level * 100:.0f} % interval)"
        )
        if drawing is not None and drawing.times_s:
            line += (
                f"; drawing from it, a step took {fmt_seconds(drawing.median_s)}, "
                f"{fmt_ratio(drawing.median_s / fixed.median_s)}x the step on one fixed batch"
            )
        return line + (
            ". The next gain is in the loader: more workers where the CPUs allow, less work an item"
        )

    def cost_s(
        self, ev: Evidence, seconds: float, rounds: int, step_s: float | None = None
    ) -> float:
        """Ten of the old loader's batches a block, three variants a round, the loaders alone.

        A batch of the old loader takes its measured share of a step; each loader alone at
        least a second, or the steady count of the old loader's batches (``time_loader``).
        """
        step = ev.step_s if step_s is None else step_s
        batch_s = ev.loader_share * ev.step_s
        block = max(0.01, BLOCK_BATCHES * batch_s)
        alone = 2 * max(1.0, STEADY_BATCHES * batch_s)
        return alone + 6 * block + max(seconds, 3 * rounds * block) + 8 * step

    def block_s(self, s: TuneSession) -> float | None:
        if self.alone is None:
            return None
        return max(0.01, BLOCK_BATCHES * self.alone[0].per_batch_s)

    def block_s_under(self, s: TuneSession) -> float | None:
        """Under another fix (both sides draw from the new loader): ten steps, four waves.

        Ten steps with the kept fixes, and at least four waves of the new loader's workers (ten
        of its batches without workers).

        Its workers hand batches over in waves, one batch a worker; a block of a few steps
        lands on a wave or between two, which on the H200 (ResNet-50, 8 workers, 10 of its
        14.7 ms batches a block: about 3 steps of 38-58 ms) spread every compute fix's interval
        over 0.82-1.21x. Ten steps and four waves a block average over the waves.
        """
        if self.alone is None:
            return None
        per_batch = self.alone[1].per_batch_s
        step = s.kept.step_s or 0.0
        return max(
            0.01, BLOCK_BATCHES * per_batch, WAVES * self.workers * per_batch, BLOCK_BATCHES * step
        )

    def calls_under(self, s: TuneSession) -> int | None:
        """Under another fix, over a short epoch: whole epochs a block, as many on both sides.

        Each epoch of the new loader starts with a refill (its workers start the epoch's batches
        only when it begins): on the H200's ResNet-50, 305 ms against 24 ms a batch after it,
        every 32 batches. A block of a fixed time holds a refill or not, and on identical work
        on a CPU (``benchmarks/loader_blocks.py``) blocks of four waves gave intervals up to 1.73
        wide (high/low), where blocks of one epoch gave at most 1.05.
        So where an epoch is short (:data:`SHORT_EPOCH_S`), a block is the whole epochs nearest
        :meth:`block_s_under`; over longer epochs a refill falls in few blocks, and a block lasts
        that long instead. ``None`` also without an epoch length (an iterable dataset) or where
        a call of the step is itself an epoch.
        """
        if self.alone is None or self.new is None or s.target.epoch_mode:
            return None
        try:
            epoch = len(self.new)
        except TypeError:  # an IterableDataset without __len__: no epoch to align to
            return None
        step = max(s.kept.step_s or 0.0, self.alone[1].per_batch_s)
        if epoch < 1 or epoch * step > SHORT_EPOCH_S:
            return None
        return epoch * max(1, round((self.block_s_under(s) or 0.0) / (epoch * step)))

    @contextlib.contextmanager
    def applied(self, s: TuneSession) -> Iterator[None]:
        s.draw_from(self.new)
        yield

    def code(self, s: TuneSession) -> list[str]:
        t = s.target
        old = t.loader
        name = t.loader_name or "loader"
        dataset = _name_of(s.user_ns, old.dataset) or f"{name}.dataset"
        args = [dataset]
        if old.batch_size is not None:
            args.append(f"batch_size={old.batch_size}")
            sampler = type(old.sampler).__name__
            if sampler == "RandomSampler":
                args.append("shuffle=True")
            elif sampler != "SequentialSampler":
                args.append(f"sampler={_name_of(s.user_ns, old.sampler) or name + '.sampler'}")
            if old.drop_last:
                args.append("drop_last=True")
        elif old.batch_sampler is not None:
            args.append(
                f"batch_sampler={_name_of(s.user_ns, old.batch_sampler) or name + '.batch_sampler'}"
            )
        default_collate = getattr(old.collate_fn, "__name__", "") == "default_collate"
        if not default_collate:
            args.append(f"collate_fn={_name_of(s.user_ns, old.collate_fn) or name + '.collate_fn'}")
        settings = new_settings(old, cuda=t.cuda, workers=self.workers)
        args += [f"{k}={v!r}" for k, v in settings.items() if v is not None]
        lines = [
            f"{name} = torch.utils.data.DataLoader({', '.join(args)})  # workers: "
            f"{self.count.why()}"
        ]
        if t.batches_name:
            lines.append(
                f"{t.batches_name} = itertools.chain.from_iterable(itertools.repeat({name}))"
                "  # endless, epoch after epoch (import itertools)"
            )
        if t.cuda:
            lines.append("# in the step: x.to(device, non_blocking=True) (pinned memory)")
        return lines

    def apply(self, s: TuneSession) -> str:
        import itertools

        t = s.target
        # A loader of its own for the notebook: the one measured is shut down with the rest.
        new = rebuilt(t.loader, **new_settings(t.loader, cuda=t.cuda, workers=self.workers))
        done = []
        if t.loader_name is not None:
            s.user_ns[t.loader_name] = new
            done.append(f"{t.loader_name} is a new DataLoader")
        if t.batches_name is not None:
            s.user_ns[t.batches_name] = itertools.chain.from_iterable(itertools.repeat(new))
            done.append(f"{t.batches_name} draws from it, epoch after epoch")
        settings = ", ".join(f"{k}={v}" for k, v in worker_settings(new).items() if v)
        return "; ".join(done) + f" ({settings})"

    def release(self, s: TuneSession) -> None:
        if self.new is not None:
            shut_down(self.new)
            self.new = None


def _name_of(user_ns: dict[str, Any], obj: Any) -> str | None:
    """The notebook's name for ``obj`` (for the pasted code), if it has one."""
    for name, value in user_ns.items():
        if value is obj and not name.startswith("_") and name.isidentifier():
            return name
    return None
