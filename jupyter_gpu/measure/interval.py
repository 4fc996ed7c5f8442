"""A ratio of two timings with its interval: the median of round-paired ratios.

Each round of a comparison times every variant once, back to back (``compare.py``), so round
``i`` gives one ratio ``r_i = t_baseline,i / t_variant,i``. A machine that slows down for a while
(a clock that drops, a neighbour's job) slows both sides of a pair alike, so the ratios vary
much less than the times do.

The interval is the distribution-free confidence interval for a median: the order statistics
``x_(j)`` and ``x_(n+1-j)`` with the largest ``j`` for which ``P(j <= B <= n-j) >= level``,
``B ~ Binomial(n, 1/2)`` (the sign test's interval: W. J. Conover, *Practical Nonparametric
Statistics*, 3rd ed., section 3.2). It needs no resampling and no assumption about the ratios'
distribution; it is exact, so the level it reaches is reported (a level above the one asked,
since ``j`` is whole). Below 6 values no ``j`` reaches 95 %: the interval is then the whole
range, and says its lower level.

It does assume its values independent, and neighbouring rounds are not: a shared machine's state
(another tenant's memory traffic, a clock) drifts over seconds and moves the ratio of two
different workloads for many rounds at once. On a quiet 2-core VM, six benches of one compiled
CPU MLP in one process gave intervals over single rounds that did not overlap (0.515 (0.490-0.550)
beside 0.658 (0.651-0.665)), while a variant against itself stayed within 1.3 % of 1.0. So the
rounds are cut into ``BATCHES`` stretches of consecutive rounds (the method of batch means) and
the interval is taken over the stretches' medians: a drift within the run widens it, as it
should. The figure itself stays the median of every round's ratio. With ``BATCHES`` rounds or
fewer each stretch is one round.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from .digits import three_digits

LEVEL = 0.95
"""The confidence the intervals are asked for."""
BATCHES = 12
"""Stretches of consecutive rounds the interval is taken over (12 medians reach 96.1 %)."""


def _binomial_cdf_half(k: int, n: int) -> float:
    """``P(B <= k)`` for ``B ~ Binomial(n, 1/2)``."""
    return float(sum(math.comb(n, i) for i in range(k + 1))) / float(2**n)


def median_interval(values: list[float], level: float = LEVEL) -> tuple[float, float, float]:
    """``(low, high, reached)``: the order-statistic interval for the median of ``values``.

    ``reached`` is the interval's exact coverage (at least ``level`` when there are 6 values or
    more; the whole range's ``1 - 2**(1-n)`` below that).

    Raises:
        ValueError: for no values, or a level outside (0, 1).
    """
    if not values:
        raise ValueError("need at least one value")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    ordered = sorted(values)
    n = len(ordered)
    j = 1  # 1-based: the whole range
    while j + 1 <= n // 2 and 1 - 2 * _binomial_cdf_half(j, n) >= level:
        j += 1
    reached = 1 - 2 * _binomial_cdf_half(j - 1, n) if n > 1 else 0.0
    return ordered[j - 1], ordered[n - j], reached


@dataclass(frozen=True)
class Ratio:
    """How many times longer the baseline took than the variant, with its interval.

    Above 1 the variant is faster. ``low``/``high`` bound the median paired ratio at
    ``level`` (see the module doc); ``rounds`` pairs went into it.
    """

    value: float
    low: float
    high: float
    rounds: int
    level: float
    variant: str = ""
    baseline: str = ""

    @property
    def measurable(self) -> bool:
        """Whether the interval excludes 1.0 (a difference the rounds can tell apart)."""
        return self.low > 1.0 or self.high < 1.0

    @property
    def faster(self) -> bool:
        """The variant is measurably faster than the baseline."""
        return self.low > 1.0

    @property
    def slower(self) -> bool:
        """The variant is measurably slower than the baseline."""
        return self.high < 1.0

    def span(self) -> str:
        """``1.29-1.37x``: the interval, as speedups."""
        return f"{fmt_ratio(self.low)}-{fmt_ratio(self.high)}x"

    def how_sure(self) -> str:
        """``95 % interval, 12 rounds``."""
        return f"{self.level * 100:.0f} % interval, {self.rounds} rounds"

    def describe(self) -> str:
        """A phrase for a report, e.g. ``1.33x faster (1.29-1.37x; 95 % interval, 12 rounds)``.

        ``no measurable difference (0.970-1.04x; ...)`` when the interval holds 1.0; a slower
        variant reads ``1.25x slower (1.21-1.30x slower; ...)``.
        """
        sure = self.how_sure()
        if not self.measurable:
            return f"no measurable difference ({self.span()}; {sure})"
        if self.faster:
            return f"{fmt_ratio(self.value)}x faster ({self.span()}; {sure})"
        slower = f"{fmt_ratio(1 / self.high)}-{fmt_ratio(1 / self.low)}x slower"
        return f"{fmt_ratio(1 / self.value)}x slower ({slower}; {sure})"


def fmt_ratio(value: float) -> str:
    """A ratio with 3 significant digits, zeros kept (``digits.py``): ``1.30``, ``0.200``.

    From 10 on, one decimal (``12.4``), from 100 none.
    """
    if value >= 99.95:
        return f"{value:.0f}"
    return three_digits(value) if value < 9.995 else f"{value:.1f}"


def stretch_medians(values: list[float], batches: int = BATCHES) -> list[float]:
    """The medians of ``batches`` stretches of consecutive ``values`` (sizes differ by one at most).

    With ``batches`` values or fewer, the values themselves.
    """
    n = len(values)
    if n <= batches:
        return list(values)
    return [
        statistics.median(values[i * n // batches : (i + 1) * n // batches]) for i in range(batches)
    ]


def rounds_interval(values: list[float], level: float = LEVEL) -> tuple[float, float, float]:
    """``(low, high, reached)`` for the median of values taken round after round, in order.

    The order-statistic interval over the medians of :data:`BATCHES` stretches of consecutive
    rounds (the module doc says why), widened to hold the median of all the values.

    Raises:
        ValueError: for no values, or a level outside (0, 1).
    """
    low, high, reached = median_interval(stretch_medians(values), level)
    middle = statistics.median(values)
    return min(low, middle), max(high, middle), reached


def paired_ratio(
    baseline_s: list[float],
    variant_s: list[float],
    *,
    level: float = LEVEL,
    variant: str = "",
    baseline: str = "",
) -> Ratio:
    """The :class:`Ratio` of round-paired times (``baseline_s[i]`` and ``variant_s[i]``).

    Raises:
        ValueError: for lists of different lengths, no rounds, or a time that is not positive.
    """
    if len(baseline_s) != len(variant_s) or not baseline_s:
        raise ValueError(
            f"need the same number of rounds on both sides, got {len(baseline_s)} and "
            f"{len(variant_s)}"
        )
    if min(baseline_s) <= 0 or min(variant_s) <= 0:
        raise ValueError("times must be positive")
    ratios = [b / v for b, v in zip(baseline_s, variant_s, strict=True)]
    low, high, reached = rounds_interval(ratios, level)
    return Ratio(
        statistics.median(ratios),
        low,
        high,
        len(ratios),
        reached,
        variant=variant,
        baseline=baseline,
    )
