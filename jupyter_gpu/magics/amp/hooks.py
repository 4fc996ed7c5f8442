"""``%amp on``'s autocast: open from its own line, kept across cells, closed by ``%amp off``.

torch keeps autocast's state per thread (``torch.is_autocast_enabled`` reads it), and IPython runs
a cell's statements in order in one thread, the line of ``%amp on`` among them and the pre- and
post-run-cell hooks around them. So ``%amp on`` opens ``torch.autocast`` at once, for the rest of
its own cell; the post-run-cell hook closes it after every cell, even one that raised (IPython
and ipykernel trigger it in a ``finally``), and the pre-run-cell hook opens it again before each
following cell: between cells autocast is off and nothing leaks into code that runs outside a
cell. ``%amp off`` closes it at once, for the rest of its own cell, and removes both hooks.

A ``torch.autocast`` context's ``__exit__`` puts back the state its ``__enter__`` found, so
contexts must close in the order they opened. Opening or closing this one while another
autocast context opened after it is still open (a ``with torch.autocast(...)`` block, a
``%%amp`` cell) would leave autocast in neither state when that block ends: :func:`check_nesting`
refuses it instead.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError

from . import autocast as prec


class AmpHooks:
    """The autocast of ``%amp on`` (``device``, ``dtype``) and the hooks that carry it on.

    ``start`` opens it now and registers the hooks; ``switch`` changes its dtype or device now;
    ``stop`` closes it now and unregisters both hooks.
    """

    def __init__(self, shell: Any, device: str, dtype: str) -> None:
        self.shell = shell
        self.device = device
        self.dtype = dtype
        self._ctx: Any = None
        self._level = 0
        """The number of autocast contexts open right after ours opened (ours included)."""

    @property
    def is_open(self) -> bool:
        """Whether this autocast is open in the running cell."""
        return self._ctx is not None

    def start(self) -> None:
        """Open autocast now (from the calling line on) and keep it for every following cell."""
        self._enter()
        self.shell.events.register("pre_run_cell", self.pre_run_cell)
        self.shell.events.register("post_run_cell", self.post_run_cell)

    def switch(self, device: str, dtype: str) -> None:
        """Autocast to ``dtype`` on ``device`` from now on, in this cell and the following ones."""
        self._leave()
        self.device, self.dtype = device, dtype
        self._enter()

    def stop(self) -> None:
        """Close autocast now and remove the hooks (``%amp off``, ``%unload_ext``)."""
        self._leave()
        for event, fn in (
            ("pre_run_cell", self.pre_run_cell),
            ("post_run_cell", self.post_run_cell),
        ):
            if fn in self.shell.events.callbacks[event]:
                self.shell.events.unregister(event, fn)

    def pre_run_cell(self, info: Any = None) -> None:
        if self._ctx is None:
            self._enter()

    def post_run_cell(self, result: Any = None) -> None:
        self._leave()

    @property
    def open_level(self) -> int:
        """How many autocast contexts should be open now: up to ours if open, else none."""
        return self._level if self.is_open else 0

    def _enter(self) -> None:
        ctx = prec.make_autocast(self.device, self.dtype)
        ctx.__enter__()
        self._ctx = ctx
        self._level = prec.autocast_nesting()

    def _leave(self) -> None:
        ctx, self._ctx = self._ctx, None
        if ctx is not None:
            ctx.__exit__(None, None, None)


def check_nesting(what: str, expected: int) -> None:
    """Refuse ``what`` unless exactly ``expected`` autocast contexts are open in this thread.

    Raises:
        UsageError: more (or fewer) are open: ``what`` sits inside another autocast context.
    """
    if prec.autocast_nesting() != expected:
        raise UsageError(
            f"{what} is inside another autocast context (a `with torch.autocast(...)` block or "
            "a %%amp cell), which would put back the state it found when it closes: put "
            f"{what} on a line outside that block."
        )
