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
    """A bar over the stages of a ``%tune`` run (the baseline, each fix, the stack)."""

    def __init__(self, shell: Any, total: int, budget: Budget, *, quiet: bool) -> None:
        self.total = max(1, total)
        self.budget = budget
        self.done = 0
        self.label = ""
        self.lines: list[str] = []  #: what the text form printed (terminal, tests)
        self._quiet = quiet
        #: The bar where a front end draws it; else plain lines (or nothing with -q).
        self.bar = ProgressBar(None if quiet else shell, self.total)

    def grow(self, total: int) -> None:
        """The stages are now ``total`` (the plan is known after the baseline)."""
        self.total = max(1, total, self.done)
        self._draw("")

    def stage(self, label: str) -> None:
        """A new stage begins (``label`` names it: "trying bf16 autocast")."""
        self.label = label
        self._draw("")
        if not self.bar.shown and not self._quiet:
            line = f"%tune [{self.done + 1}/{self.total}] {label}"
            self.lines.append(line)
            print(line, file=sys.stdout, flush=True)  # noqa: T201  # the terminal's progress

    def step(self) -> None:
        """The current stage is over."""
        self.done = min(self.total, self.done + 1)
        self._draw("")

    def on_round(self, done: int, most: int) -> None:
        """The timing's callback: a round is over (``compare(on_round=...)``)."""
        self._draw(f"round {done}")

    def close(self) -> None:
        """Remove the bar (the report follows)."""
        self.bar.close()

    def _draw(self, detail: str) -> None:
        extra = f", {detail}" if detail else ""
        left = describe_s(self.budget.left_s())
        self.bar.show(
            self.done,
            self.total,
            f"%tune {self.done + 1}/{self.total}: {html.escape(self.label)}{extra} "
            f"({left} of the budget left)",
        )
