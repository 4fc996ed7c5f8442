"""Claims: a sentence that states a measured relation is checked where the notebook makes it.

A notebook never writes "bf16 is faster here" in its prose, because the prose cannot know what
this run measured. It makes a *claim* instead, in the cell that measured it::

    nb.results.claim(
        "bf16-faster",
        "bf16 autocast makes this step faster than fp32",
        holds=ratio.faster,
        measured=ratio.describe(),
    )

which prints the sentence with what was measured when it holds, and, when it does not, says
so and prints what was measured instead. The claims are kept with the notebook's figures
(:class:`~.results.Results`), saved in its JSON, and ``benchmarks/update_results.py`` lists the
claims that did not hold, per tier, beside the targets: a notebook whose claim failed at full size
on its GPU is not "met".

The helpers below make the common claims from the one timing method's :class:`Ratio`, so a
"faster" claim always means "the interval is above 1" (or above a stated factor).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from jupyter_gpu.measure import Ratio

HOLDS_MARK = "✓"
FAILS_MARK = "✗"


@dataclass(frozen=True)
class Claim:
    """One checked sentence: what the notebook says, whether this run bore it out, and why.

    ``judged`` is whether the run counts for the notebook's verdict (a full-size run on a GPU
    the claim is about, as targets are judged); a smoke or CPU run still says whether the claim
    held there, but its verdict does not count.
    """

    key: str
    statement: str
    holds: bool
    measured: str
    judged: bool = True

    def line(self) -> str:
        """``✓ <statement> (<measured>)`` or ``✗ Not in this run: <statement>. Measured: ...``."""
        if self.holds:
            return f"{HOLDS_MARK} {self.statement} ({self.measured})"
        return f"{FAILS_MARK} Not in this run: {self.statement}. Measured: {self.measured}"

    def html(self) -> str:
        colour = "var(--jp-success-color1, #388e3c)" if self.holds else "var(--jp-warn-color1)"
        return f"<p style='color:{colour}'>{html.escape(self.line())}</p>"

    def _repr_pretty_(self, printer: object, cycle: bool) -> None:
        printer.text(self.line())  # type: ignore[attr-defined]  # IPython's RepresentationPrinter

    def _repr_html_(self) -> str:
        return self.html()


def faster(ratio: Ratio, at_least: float = 1.0) -> bool:
    """The variant is measurably faster by ``at_least``: the interval's low end is above it."""
    return ratio.low > at_least


def no_faster(ratio: Ratio, within: float = 0.05) -> bool:
    """No gain worth the name: the interval's high end is below ``1 + within``."""
    return ratio.high < 1.0 + within
