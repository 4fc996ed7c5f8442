"""Three significant digits that read alike at both ends of an interval.

Python's ``.3g`` drops trailing zeros (``1.2`` beside ``1.15``: an interval printed
``1.15-1.2``, or ``0.197-0.2x``) and ``#.3g``, which keeps them, also keeps a bare point
(``117.``) and turns to an exponent once rounding reaches 1,000 (``1.00e+03``).
"""

from __future__ import annotations


def three_digits(value: float) -> str:
    """``0.200``, ``1.30``, ``12.3``, ``117``; ``1000`` where rounding reaches it, not ``1e+03``.

    Values below 0.0001 keep ``.3g``'s exponent (``1.23e-05``): no figure here is that small.
    """
    return significant(value, 3)


def significant(value: float, digits: int) -> str:
    """``value`` to ``digits`` significant digits, trailing zeros kept.

    ``significant(638, 4)`` is ``638.0``, beside ``702.3``; a value with more integer digits keeps
    them all (``12345``).
    """
    text = f"{value:#.{digits}g}"
    if "e" not in text:
        return text.removesuffix(".")
    return f"{value:.0f}" if abs(value) >= 1 else f"{value:.{digits}g}"
