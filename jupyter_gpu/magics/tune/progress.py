"""The live progress of ``%tune``: which fix is being tried, and how far its rounds are.

In a Jupyter kernel it is an ipywidgets bar (a widget's value set from the running cell reaches
the front end at once, over the kernel's IOPub channel, as ``%gpu --watch`` does); it is closed
when the report is shown. A terminal IPython, which draws no widgets, gets one plain line per
stage instead. ``-q`` shows neither.
"""

from __future__ import annotations

import html
import sys
from typing import Any

from jupyter_gpu.magics.output.progress_bar import ProgressBar

from .budget import Budget, describe_s


class Progress:
    """A bar over the stages of a ``%tune`` run (the baseline, each fix, the stack).

    How many stages there are is not known until the baseline's evidence has made the plan,
    so until :meth:`plan` the count is shown without a total ("[1] measuring ..."), never with
    a guess that the next line contradicts.
    """

    def __init__(self, shell: Any, budget: Budget, *, quiet: bool) -> None:
        self.total: int | None = None  #: the stages, once the plan is made
        self.budget = budget
        self.done = 0
        self.label = ""
        self.lines: list[str] = []  #: what the text form printed (terminal, tests)
        #: Each stage's label and seconds, on the budget's clock, in the order they ran: what
        #: a run over its budget spent its time on.
        self.times: list[tuple[str, float]] = []
        self._began: float | None = None  #: when the stage under way began (None: none is)
        self._quiet = quiet
        #: The bar where a front end draws it; else plain lines (or nothing with -q).
        self.bar = ProgressBar(None if quiet else shell, 1)

    def plan(self, total: int) -> None:
        """The stages are ``total`` in all, those done included.

        Known after the baseline; lowered to the stages done when the last one planned (the
        kept fixes together) is not needed.
        """
        self.total = max(1, total, self.done)
        self._draw("")

    def stage(self, label: str) -> None:
        """A new stage begins (``label`` names it: "trying bf16 autocast")."""
        self._end_stage()
        self.label = label
        self._began = self.budget.elapsed_s()
        self._draw("")
        if not self.bar.shown and not self._quiet:
            line = f"%tune [{self._count()}] {label}"
            self.lines.append(line)
            print(line, file=sys.stdout, flush=True)  # noqa: T201  # the terminal's progress

    def skip(self, label: str, why: str) -> None:
        """A planned stage is passed without running (a fix the budget no longer holds)."""
        self.stage(f"{label}: {why}")
        self._began = None  # nothing ran: not a stage's time
        self.step()

    def step(self) -> None:
        """The current stage is over (or a stage not begun, such as a fix left out, is passed)."""
        self._end_stage()
        self.done = self.done + 1 if self.total is None else min(self.total, self.done + 1)
        self._draw("")

    def on_round(self, done: int, most: int) -> None:
        """The timing's callback: a round is over (``compare(on_round=...)``)."""
        self._draw(f"round {done}")

    def close(self) -> None:
        """Remove the bar (the report follows)."""
        self._end_stage()
        self.bar.close()

    def _end_stage(self) -> None:
        if self._began is not None:
            self.times.append((self.label, self.budget.elapsed_s() - self._began))
            self._began = None

    def _count(self) -> str:
        """The stage under way and, once planned, of how many: "2/5", or "1" before the plan."""
        if self.total is None:
            return str(self.done + 1)
        return f"{min(self.done + 1, self.total)}/{self.total}"

    def _draw(self, detail: str) -> None:
        extra = f", {detail}" if detail else ""
        left = describe_s(self.budget.left_s())
        self.bar.show(
            self.done,
            self.total if self.total is not None else self.done + 1,
            f"%tune {self._count()}: {html.escape(self.label)}{extra} ({left} of the budget left)",
        )
