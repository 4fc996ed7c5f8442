"""One ``%tune`` run's live state: the step, the repeated-runs helper, the names it rebinds.

The :class:`Session` is what every fix works through. It opens the repeated runs (which refuse
before anything runs when the step changes what cannot be put back), binds ``--batches NAME``
to ``%tune``'s own :class:`~.batches.BatchSource`, builds a variant (the step with some fixes
on) for :func:`jupyter_gpu.measure.compare`, runs a variant's first two steps from the saved
state, holds the fixes kept so far (what the next fix is timed on top of), and at the end puts
back every name it rebound and everything the runs changed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from IPython.core.error import UsageError

from jupyter_gpu.magics.replay.reach import Named
from jupyter_gpu.magics.replay.runs import RepeatedRuns, Restored
from jupyter_gpu.magics.shell.lazy_torch import loss_value
from jupyter_gpu.measure import Variant, synchronize

from .batches import BatchSource, rebuilt, shut_down
from .evidence import FirstSteps
from .kept import Kept, KeptFix

if TYPE_CHECKING:
    from .budget import Budget
    from .evidence import Evidence
    from .progress import Progress
    from .target import Target

_ITERATOR_PROBLEM = "each run draws its next item"


class OnTheStep(KeptFix, Protocol):
    """What a variant needs of a fix (``fixes.Fix`` is one): where it goes, how it goes on.

    A protocol, not ``Fix``: a fix takes the session its trial runs in, so the session names
    the fixes only through this (``fixes.TuneSession`` is a session of ``Fix``).
    """

    @property
    def order(self) -> int: ...

    def wrap(self, run: Callable[[], Any]) -> Callable[[], Any]: ...

    def applied(self, s: Any) -> AbstractContextManager[None]: ...


F = TypeVar("F", bound=OnTheStep)


class Session(Generic[F]):
    """See the module doc. ``open()`` before any run; ``close()`` always, in a ``finally``.

    ``F``: the fixes its variants are made of (``fixes.Fix``).
    """

    def __init__(self, shell: Any, target: Target, budget: Budget, progress: Progress) -> None:
        self.shell = shell
        self.user_ns: dict[str, Any] = shell.user_ns
        self.target = target
        self.budget = budget
        self.progress = progress
        self.source: BatchSource | None = BatchSource() if target.batches_name else None
        #: The loader the step as it is draws from (a twin of the user's where the user's own
        #: persistent iterator must not be reset: see :meth:`_base_loader`).
        self.base_loader: Any = None
        self._base_is_twin = False
        self.runs: RepeatedRuns | None = None
        self.step: Callable[[], Any] = lambda: None
        self.evidence: Evidence | None = None
        #: The first two steps of the step as it is (the losses every fix is compared with).
        self.base_first: FirstSteps | None = None
        #: The fixes kept so far, which the fix being tried is timed on top of (``kept.py``):
        #: whatever a fix runs of its own (its first compiled call, a fixed-batch variant) runs
        #: with them on.
        self.kept: Kept[F] = Kept()
        self._bound: dict[str, Any] = {}

    # ------------------------------------------------------------------ names

    def bind(self, name: str, value: Any) -> None:
        """Bind ``name`` in the notebook, keeping what it held first (put back by close)."""
        if name not in self._bound:
            self._bound[name] = self.user_ns[name]
        self.user_ns[name] = value

    def original(self, name: str) -> Any:
        """What ``name`` held before ``%tune`` rebound it."""
        return self._bound.get(name, self.user_ns.get(name))

    def not_by_name(self, name: str, what: str) -> str | None:
        """Why binding ``name`` to ``what`` would not change the step (``None``: it would).

        A fix that works by rebinding a notebook name (the compiled model, the rebuilt
        optimizer) changes the step only where the step loads that name: one that holds the
        object another way (a closure, a default argument, ``trainer.model``) would run as it
        was, and the fix would be timed at 1.00x on nothing.
        """
        assert self.runs is not None
        if name in self.runs.reached.loaded_names:
            return None
        routes = self.runs.reached.named_routes.get(name, [])
        held = ", ".join(routes[:2])
        how = f"holds it as {held}" if routes else "reaches it otherwise, if at all"
        return (
            f"{self.target.expr} never loads the name {name} (it {how}), and %tune tries this "
            f"by binding {name} to {what}: the step would run as it is. Use the name {name} "
            "in the step (or a function it calls), or apply the fix where the step gets it"
        )

    @contextlib.contextmanager
    def rebound(self, name: str, value: Any) -> Iterator[None]:
        """``name`` holds ``value`` inside; after, what it held before ``%tune`` rebound it."""
        self.bind(name, value)
        try:
            yield
        finally:
            self.user_ns[name] = self.original(name)

    def draw_from(self, loader: Any) -> None:
        """The step's batches from ``loader``, as a fix that replaces the loader has them.

        Through the batch source where ``--batches`` bound one, else by binding the loader's
        name to it (put back by close); a step that names no loader is left as it is.
        """
        if self.source is not None:
            self.source.use(loader)
        elif self.target.loader_name is not None:
            self.bind(self.target.loader_name, loader)

    # ------------------------------------------------------------------ open, close

    def open(self) -> None:
        """Bind the batch source and open the repeated runs (UsageError before any run).

        Raises:
            UsageError: the step changes what cannot be put back (with the option that fixes
                it: ``--batches NAME`` for a step that draws from an iterator).
        """
        t = self.target
        if self.source is not None and t.batches_name is not None:
            self.bind(t.batches_name, self.source)
        named = Named(
            {t.model_name: t.model},
            {t.optimizer_name: t.optimizer} if t.optimizer_name else {},
            supplied=(self.source,) if self.source is not None else (),
        )
        try:
            self.runs = RepeatedRuns(
                self.shell,
                [t.code],
                what=f'%tune "{t.expr}"',
                named=named,
                expected_runs="many times (the step as it is, then with each fix, in "
                "interleaved rounds)",
            )
        except UsageError as refused:
            self.put_back_names()
            text = str(refused)
            if _ITERATOR_PROBLEM in text:
                text += (
                    " A step that draws its batches with next(NAME) is fed by %tune itself: "
                    "pass --batches NAME (and --loader LOADER when NAME does not hold its "
                    "DataLoader); NAME is put back as it was."
                )
            raise UsageError(text) from None
        code, ns = t.code, self.user_ns
        self.step = self.runs.call(lambda: eval(code, ns))  # noqa: S307  # the user's own step
        self.base_loader = self._base_loader()

    def _base_loader(self) -> Any:
        """The loader "as is" draws from: the user's, or its twin where that must stay untouched.

        A loader with persistent workers hands out one iterator, its own (``loader._iterator``):
        starting an epoch of it would reset the user's iterator mid-epoch. Its twin (the same
        data and settings) is timed instead.
        """
        loader = self.target.loader
        if loader is None:
            return None
        if loader.num_workers and loader.persistent_workers:
            self._base_is_twin = True
            return rebuilt(loader)
        return loader

    def put_back_names(self) -> None:
        for name, value in self._bound.items():
            self.user_ns[name] = value
        self._bound.clear()

    def finish(self) -> Restored | None:
        """Put everything the runs changed back (the repeated runs' restore), once."""
        runs, self.runs = self.runs, None
        if runs is None:
            return None
        synchronize(self.target.device)
        return runs.finish()

    def close(self) -> None:
        """Put the names back and stop the workers of the twin loader (idempotent)."""
        self.put_back_names()
        if self.source is not None:
            self.source.release()
        if self._base_is_twin and self.base_loader is not None:
            shut_down(self.base_loader)
            self._base_is_twin = False

    def reset(self) -> None:
        """Back to the saved state (model, optimizer, RNG...) before a variant's first steps."""
        assert self.runs is not None
        synchronize(self.target.device)
        self.runs.reset()

    # ------------------------------------------------------------------ variants

    @contextlib.contextmanager
    def as_is(self) -> Iterator[None]:
        """The step's batches from the loader as it is (what every variant starts from)."""
        t = self.target
        if self.source is not None:
            self.source.use(self.base_loader)
        elif t.epoch_mode and t.loader_name is not None:
            self.bind(t.loader_name, self.base_loader)
        yield

    def variant(self, fixes: Sequence[F]) -> Variant:
        """The step with ``fixes`` on (none: as it is), for ``compare`` and the first steps."""
        ordered = sorted(fixes, key=lambda f: f.order)
        run = self.step
        for fix in ordered:
            run = fix.wrap(run)

        # A variant with a fix that feeds the step its batches (the kept input pipeline) draws
        # from that fix's loader alone: switching to the loader as it is first would start the
        # new loader's epoch afresh at every block, dropping the batches its workers had ready
        # (all 32 of an epoch, with 8 workers and prefetch 4), so both sides of a fix timed on
        # top of the kept loader would each begin from an empty pipeline, as no training loop does.
        feeds = any(fix.feeds for fix in ordered)

        @contextlib.contextmanager
        def context() -> Iterator[None]:
            with contextlib.ExitStack() as stack:
                if not feeds:
                    stack.enter_context(self.as_is())
                for fix in ordered:
                    stack.enter_context(fix.applied(self))
                yield

        return Variant(run, context)

    def first_steps(self, fixes: Sequence[F]) -> FirstSteps:
        """The variant's first two steps from the state as it stands (reset before calling).

        Its batches start a fresh epoch (the same first batch from the same RNG state); the
        first step is timed (a compile shows there) and, on CUDA, its allocator peak read
        without touching torch's own peak counter (``PeakWatch``).
        """
        variant = self.variant(fixes)
        device = self.target.device
        with variant.entered():
            batch = None
            if self.source is not None:
                self.source.restart()
                batch = self.source.peek()
            watch = None
            if self.target.cuda:
                import torch  # loaded already: the magic imported it

                from jupyter_gpu.magics.probes.peak import PeakWatch

                watch = PeakWatch(torch.cuda.current_device(), always_trace=True)
                synchronize(device)
                watch.start()
            try:
                synchronize(device)
                started = time.perf_counter()
                first = variant.run()
                synchronize(device)
                first_s = time.perf_counter() - started
            finally:
                reading = watch.stop() if watch is not None else None
            second = variant.run()
            synchronize(device)
        peak = reading.above_start_bytes if reading is not None else None
        return FirstSteps((loss_value(first), loss_value(second)), first_s, peak, batch)
