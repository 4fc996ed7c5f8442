"""Feedback for the notebooks' exercises: a check that says what is right or what to try.

A check returns feedback; :func:`require` raises when it failed, with the hint as the message,
so a check cell fails on a wrong or missing answer. The solutions (collapsed cells) call the
same checks, so a solution that stops working fails CI.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, TypeVar


@dataclass(frozen=True)
class Feedback:
    """The outcome of one exercise check."""

    passed: bool
    message: str

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        return f"{'✓ correct' if self.passed else '✗ not yet'}: {self.message}"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        colour = "#2e7d32" if self.passed else "#b35900"
        mark = "✓ correct" if self.passed else "✗ not yet"
        return (
            f'<p style="margin:2px 0"><b style="color:{colour}">{mark}</b>: '
            f"{html.escape(self.message)}</p>"
        )


def check(passed: bool, success: str, hint: str) -> Feedback:
    """``success`` when ``passed``, else ``hint`` (what to look at next)."""
    return Feedback(bool(passed), success if passed else hint)


def check_close(
    value: float, expected: float, *, rel: float, what: str, hint: str = ""
) -> Feedback:
    """Whether ``value`` is within ``rel`` (relative) of ``expected``, said in words."""
    ok = abs(value - expected) <= rel * abs(expected)
    detail = f"{what}: yours {value:.4g}, measured {expected:.4g} (within {rel:.0%} passes)"
    return Feedback(ok, detail if ok else f"{detail}. {hint}".strip())


class ExerciseNotSolvedError(AssertionError):
    """An exercise's check cell failed: the message says what to look at."""


FeedbackT = TypeVar("FeedbackT", bound=Feedback)


def require(feedback: FeedbackT) -> FeedbackT:
    """Return ``feedback`` if it passed; otherwise show it and raise.

    A check cell ends with ``require(...)``, so a wrong or missing answer stops "Run all" there
    (the notebooks tag these cells ``raises-exception`` so that CI runs on past them).

    Raises:
        ExerciseNotSolvedError: ``feedback`` did not pass.
    """
    if not feedback.passed:
        raise ExerciseNotSolvedError(str(feedback))
    return feedback
