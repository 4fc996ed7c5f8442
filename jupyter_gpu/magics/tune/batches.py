"""Where the step's batches come from while ``%tune`` runs, and the DataLoaders it builds.

:class:`BatchSource` is the iterator ``%tune`` binds to ``--batches NAME``: it draws from the
loader being measured, epoch after epoch, or hands out one fixed batch. Switching it to another
loader starts that loader's epoch afresh, which empties the queue its workers filled while the
other loader was timed: a worker never gets credit for batches it made during someone else's
turn (``DataLoader``'s persistent iterator does this in ``_reset``: it waits for the batches in
flight and drops them). The fresh epoch of a loader with workers then draws its first batch
before the timed block starts (:meth:`BatchSource.use` says why).

:func:`rebuilt` makes a DataLoader over the same dataset, sampler (or batch sampler), collate
function, batch size, ``drop_last``, worker init function and generator as a given one, with
other worker settings; :func:`shut_down` stops its workers when ``%tune`` is done with it.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass
from typing import Any

from jupyter_gpu.measure import fmt_seconds

#: Keyword arguments copied from a loader to its rebuilt twin when the DataLoader takes them.
_COPIED = (
    "collate_fn",
    "worker_init_fn",
    "generator",
    "timeout",
    "multiprocessing_context",
    "in_order",
)


class BatchSource:
    """An iterator over the batches of the loader it is told to use (see the module doc)."""

    def __init__(self) -> None:
        self.loader: Any = None
        self._it: Any = None
        self._fixed: tuple[Any, ...] | None = None
        self._held: list[Any] = []

    def __iter__(self) -> BatchSource:
        return self

    def __next__(self) -> Any:
        if self._held:
            return self._held.pop()
        if self._fixed is not None:
            return self._fixed[0]
        if self._it is None:
            raise RuntimeError("%tune's batch source was used before it was given a loader")
        try:
            return next(self._it)
        except StopIteration:
            self._it = iter(self.loader)  # the next epoch
            return next(self._it)

    def use(self, loader: Any) -> None:
        """Draw from ``loader`` from now on; a fresh epoch when it is not the one in use.

        A fresh epoch of a loader with workers starts with its pipeline filled: its first batch
        is drawn here (untimed: this runs in a variant's context) and handed to the next call,
        while the workers go on to the next batches. A timed block then starts as deep in an
        epoch does: one batch ready, the next in the making. Without this, every block would
        wait for a whole batch at its start, which a step deep in an epoch never does; with it,
        a loader whose workers keep up is timed exactly, and one they cannot keep up with gains
        at most a batch's production time a block, beyond the step's own time.
        """
        if loader is self.loader and self._fixed is None and self._it is not None:
            return
        self._fixed = None
        self._held.clear()
        self.loader = loader
        self._it = iter(loader)
        if getattr(loader, "num_workers", 0):
            self.peek()

    def restart(self) -> None:
        """A fresh epoch of the loader in use (the same first batch from the same RNG state)."""
        self._held.clear()
        self._fixed = None
        self._it = iter(self.loader)

    def use_fixed(self, batch: Any) -> None:
        """Hand out ``batch`` at every call, until :meth:`use` or :meth:`restart`."""
        self._held.clear()
        self._fixed = (batch,)

    def peek(self) -> Any:
        """The next batch, left to be drawn again."""
        batch = next(self)
        self._held.append(batch)
        return batch

    def release(self) -> None:
        """Drop the iterator (a worker iterator's workers stop when it is collected)."""
        shut_down_iterator(self._it)
        self._it = self.loader = self._fixed = None
        self._held.clear()


def loader_kwargs(loader: Any) -> dict[str, Any]:
    """The arguments that make a DataLoader that batches ``loader``'s data the same way."""
    from torch.utils.data import DataLoader

    accepted = inspect.signature(DataLoader.__init__).parameters
    kwargs: dict[str, Any] = {"dataset": loader.dataset}
    if loader.batch_size is not None:  # the loader made its own BatchSampler
        kwargs.update(batch_size=loader.batch_size, sampler=loader.sampler)
        kwargs["drop_last"] = loader.drop_last
    elif loader.batch_sampler is not None:
        kwargs["batch_sampler"] = loader.batch_sampler
    else:
        kwargs.update(batch_size=None, sampler=loader.sampler)
    for name in _COPIED:
        if name in accepted and hasattr(loader, name):
            kwargs[name] = getattr(loader, name)
    return kwargs


def worker_settings(loader: Any) -> dict[str, Any]:
    """``num_workers``, ``pin_memory``, ``persistent_workers``, ``prefetch_factor`` of a loader."""
    return {
        "num_workers": int(loader.num_workers),
        "pin_memory": bool(loader.pin_memory),
        "persistent_workers": bool(loader.persistent_workers),
        "prefetch_factor": loader.prefetch_factor if loader.num_workers else None,
    }


def rebuilt(loader: Any, **settings: Any) -> Any:
    """A new DataLoader over ``loader``'s data with ``settings`` (worker settings) changed."""
    from torch.utils.data import DataLoader

    kwargs = loader_kwargs(loader)
    kwargs.update(worker_settings(loader))
    kwargs.update(settings)
    if not kwargs["num_workers"]:
        kwargs.update(persistent_workers=False, prefetch_factor=None)
    return DataLoader(**kwargs)


def shut_down_iterator(it: Any) -> None:
    """Stop a worker iterator's processes now (its own ``__del__`` does the same, later)."""
    stop = getattr(it, "_shutdown_workers", None)
    if callable(stop):
        stop()


def shut_down(loader: Any) -> None:
    """Stop the persistent workers of a loader ``%tune`` made (a no-op without any)."""
    it = getattr(loader, "_iterator", None)
    if it is not None:
        shut_down_iterator(it)
        loader._iterator = None


#: The loader alone is timed over at least this many batches after its first wave ...
STEADY_BATCHES = 16
#: ... and at least this many waves (a batch per worker each): the batches the other workers
#: made while the first was awaited come at once, and would make a short count look fast.
STEADY_WAVES = 4


@dataclass(frozen=True)
class LoaderAlone:
    """A loader timed on its own (seconds).

    ``first_s``: the first batch of a fresh epoch (workers starting); ``per_batch_s``: the steady
    time per batch over ``batches`` batches, counted after the first wave (the first batch of
    each worker), drawn in ``epochs`` epochs (more than one: the epoch's end came first, and the
    next epoch's refill is counted as a training loop waits for it); ``short``: why fewer than
    the steady count were drawn (the epoch ended on a loader that cannot go on without new
    workers, or the time cap came first), empty when the figure is steady.
    """

    first_s: float
    per_batch_s: float
    batches: int
    short: str = ""
    epochs: int = 1

    def describe(self) -> str:
        """``2.1 ms a batch over 64 batches (first 310 ms)``, saying when the count is short.

        Over more than one epoch: ``over 32 batches in 2 epochs (the epoch boundary's refill
        counted, ...)``.
        """
        note = f"; short: {self.short}, not a steady figure" if self.short else ""
        over = f"{self.batches} batches"
        if self.epochs > 1:
            over += (
                f" in {self.epochs} epochs (the epoch boundary's refill counted, as a training "
                "loop waits for it)"
            )
        return (
            f"{fmt_seconds(self.per_batch_s)} a batch over {over} (first "
            f"{fmt_seconds(self.first_s)}{note})"
        )


def steady_count(workers: int) -> int:
    """The batches a steady figure needs: :data:`STEADY_BATCHES`, or :data:`STEADY_WAVES` waves."""
    return max(STEADY_BATCHES, STEADY_WAVES * workers)


def goes_on(loader: Any) -> bool:
    """Whether a next epoch of ``loader`` keeps its pipeline: no workers, or persistent ones.

    A new iterator of a loader with ``persistent_workers`` resumes the same workers (a training
    loop's next epoch waits only for their first batches again); one without workers has none
    to start. Non-persistent workers would be started anew: their start-up is the first batch's
    figure, not a steady one.
    """
    workers = int(getattr(loader, "num_workers", 0) or 0)
    return workers == 0 or bool(getattr(loader, "persistent_workers", False))


class _Epochs:
    """The batches of ``loader``, going on into its next epoch where :func:`goes_on` allows."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.go_on = goes_on(loader)
        self.it = iter(loader)
        #: The epoch the last batch came from (1: the first).
        self.epoch = 1

    def __next__(self) -> Any:
        try:
            return next(self.it)
        except StopIteration:
            if not self.go_on:
                raise
            self.it = iter(self.loader)  # persistent workers: the same ones, resumed
            self.epoch += 1
            return next(self.it)  # an empty epoch ends the count (StopIteration)


def time_loader(loader: Any, *, least_s: float = 1.0, most_s: float = 4.0) -> LoaderAlone:
    """Draw batches from a fresh epoch of ``loader``, with nothing else running.

    The first batch is timed apart (workers starting, their queues filling), and the rest of
    the first wave (one batch per worker, made side by side while the first was awaited) is
    drawn untimed; then batches are counted, each from the previous one, until both
    :func:`steady_count` batches and ``least_s`` seconds are reached: the steady rate at which
    the loader alone can feed a step. Where the epoch ends first, a loader without workers or
    with persistent ones goes on into its next epoch (a new iterator, the workers kept), the
    boundary's refill counted as a training loop sees it: an epoch of 32 batches gave 24 after
    the first wave of 8 workers, short of the 32 a steady figure needs (the H200's ResNet-50).
    ``most_s`` caps the timed part, and the epoch's end stops a loader whose workers are not
    persistent; either before the steady count makes the figure ``short`` (it says which).
    """
    workers = int(getattr(loader, "num_workers", 0) or 0)
    wanted = steady_count(workers)
    draws = _Epochs(loader)
    start = time.perf_counter()
    next(draws)
    first = time.perf_counter() - start
    short = ""
    done = 0
    first_epoch = last_epoch = draws.epoch
    try:
        for _ in range(max(0, workers - 1)):  # the rest of the first wave
            next(draws)
        start = time.perf_counter()
        elapsed = 0.0
        first_epoch = last_epoch = draws.epoch
        while done < wanted or elapsed < least_s:
            if elapsed >= most_s:
                if done < wanted:
                    short = f"the {most_s:g} s cap came after {done} of {wanted} batches"
                break
            next(draws)
            if done == 0:
                first_epoch = draws.epoch
            last_epoch = draws.epoch
            done += 1
            elapsed = time.perf_counter() - start
    except StopIteration:
        if done < wanted:
            short = f"the epoch ended after {done} of the {wanted} batches a steady figure needs"
            if not draws.go_on:
                short += " (its workers are not persistent: a next epoch would start new ones)"
    elapsed = time.perf_counter() - start
    if draws.it is not getattr(loader, "_iterator", None):
        shut_down_iterator(draws.it)
    return LoaderAlone(first, elapsed / max(done, 1), done, short, last_epoch - first_epoch + 1)
