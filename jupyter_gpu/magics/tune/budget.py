"""``--budget``: how long ``%tune`` may take, read from ``5m``, ``90s``, ``1m30s`` or ``120``.

The budget is kept by not *starting* a fix that would not fit in what is left: a fix already
running finishes (a torch.compile cannot be stopped halfway), and the fixes not reached are
listed as such in the report.
"""

from __future__ import annotations

import argparse
import re
import time
from dataclasses import dataclass, field

#: The budget when none is given: the issue's "a full %tune of a GPT-2-small step in 5 minutes".
DEFAULT_S = 300.0
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(h|m|min|s|sec)?", re.IGNORECASE)
_UNITS = {"h": 3600.0, "m": 60.0, "min": 60.0, "s": 1.0, "sec": 1.0, None: 1.0}


def parse_budget(text: str) -> float:
    """Seconds from ``5m``, ``90s``, ``1m30s``, ``0.5h`` or a plain number of seconds.

    Raises:
        argparse.ArgumentTypeError: anything else, or a budget that is not positive.
    """
    source = text.strip().lower()
    total, at = 0.0, 0
    for match in _PART.finditer(source):
        if match.start() != at or not match.group(0):
            break
        unit = match.group(2)
        total += float(match.group(1)) * _UNITS[unit.lower() if unit else None]
        at = match.end()
    if at != len(source) or not source or total <= 0:
        raise argparse.ArgumentTypeError(
            f"--budget {text!r}: give a time such as 5m, 90s or 1m30s (seconds if no unit)"
        )
    return total


@dataclass
class Budget:
    """A deadline on the monotonic clock, from ``seconds`` after it was made."""

    seconds: float
    started: float = field(default_factory=time.monotonic)

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def left_s(self) -> float:
        """Seconds left (0 or more)."""
        return max(0.0, self.seconds - self.elapsed_s())

    def allows(self, seconds: float) -> bool:
        """Whether ``seconds`` more still fit."""
        return self.left_s() >= seconds


def describe_s(seconds: float) -> str:
    """``4m 12s``, ``38 s``, ``1.5 s``: a budget or an elapsed time for a sentence."""
    if seconds >= 60:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes}m {rest:02d}s"
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
