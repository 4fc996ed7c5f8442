"""The ratio's interval: the order-statistic interval for a median, and how it reads."""

from __future__ import annotations

import math
import random

import pytest

from jupyter_gpu.measure.interval import (
    BATCHES,
    Ratio,
    median_interval,
    paired_ratio,
    rounds_interval,
    stretch_medians,
)


def test_the_interval_takes_the_order_statistics_the_binomial_allows() -> None:
    # n = 10: P(2 <= B <= 8) = 1 - 2 * 11/1024 = 97.9 % (j = 2); j = 3 would be 89 %.
    values = [float(v) for v in range(1, 11)]
    low, high, reached = median_interval(values)
    assert (low, high) == (2.0, 9.0)
    assert reached == pytest.approx(1 - 2 * 11 / 1024)
    # n = 20: j = 6, 95.9 %.
    low, high, reached = median_interval([float(v) for v in range(20)])
    assert (low, high) == (5.0, 14.0)
    assert reached == pytest.approx(1 - 2 * sum(math.comb(20, i) for i in range(6)) / 2**20)


def test_below_six_values_the_whole_range_and_its_lower_level() -> None:
    low, high, reached = median_interval([3.0, 1.0, 2.0, 5.0, 4.0])
    assert (low, high) == (1.0, 5.0)
    assert reached == pytest.approx(1 - 2 / 32)  # 93.75 %: below 95, and said so
    assert median_interval([2.0]) == (2.0, 2.0, 0.0)


def test_the_interval_covers_the_true_median_as_often_as_it_says() -> None:
    rng = random.Random(7)
    trials, covered = 2000, 0
    for _ in range(trials):
        sample = [rng.lognormvariate(0, 0.3) for _ in range(12)]  # true median 1.0
        low, high, _ = median_interval(sample)
        covered += low <= 1.0 <= high
    assert covered / trials >= 0.95 - 0.015  # n = 12: 96.1 % exact; sampling error allowed


def test_a_paired_ratio_reads_faster_slower_or_no_difference() -> None:
    base = [2.0, 2.1, 1.9, 2.0, 2.05, 1.95, 2.0, 2.02]
    fast = [b / 1.5 for b in base]
    ratio = paired_ratio(base, fast, variant="compiled", baseline="eager")
    assert ratio.value == pytest.approx(1.5)
    assert ratio.faster
    assert ratio.describe().startswith("1.50x faster (1.50-1.50x; 99 % interval, 8 rounds)")
    slow = paired_ratio(base, [b * 1.25 for b in base])
    assert slow.slower
    assert slow.describe().startswith("1.25x slower")
    same = Ratio(1.01, 0.97, 1.04, 12, 0.961)
    assert not same.measurable
    assert same.describe() == "no measurable difference (0.970-1.04x; 96 % interval, 12 rounds)"


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="same number"):
        paired_ratio([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="positive"):
        paired_ratio([1.0], [0.0])
    with pytest.raises(ValueError, match="at least one"):
        median_interval([])


def test_a_ratio_that_drifts_during_the_run_widens_its_interval() -> None:
    """Rounds share the machine's state with their neighbours: a drift must widen the interval.

    On a quiet 2-core VM six benches of one compiled MLP, over single rounds, gave intervals
    that did not overlap (0.515 (0.490-0.550) beside 0.658 (0.651-0.665)). Here the ratio moves
    from 0.9 to 1.1 over 100 rounds: an interval over single rounds (as if they were
    independent) holds neither half's median; one over stretches of rounds holds both.
    """
    rng = random.Random(3)
    n = 100
    ratios = [0.9 + 0.2 * i / (n - 1) + rng.gauss(0, 0.002) for i in range(n)]
    halves = [sorted(ratios[: n // 2])[n // 4], sorted(ratios[n // 2 :])[n // 4]]
    naive_low, naive_high, _ = median_interval(ratios)
    assert not any(naive_low <= h <= naive_high for h in halves)  # the flaw, shown
    ratio = paired_ratio(ratios, [1.0] * n)
    assert all(ratio.low <= h <= ratio.high for h in halves), (ratio, halves)
    assert ratio.level >= 0.95
    assert ratio.rounds == n


def test_stretches_are_consecutive_and_even_and_few_rounds_are_their_own() -> None:
    values = [float(i) for i in range(30)]
    medians = stretch_medians(values)
    assert len(medians) == BATCHES
    assert medians == sorted(medians)  # consecutive, in order
    assert stretch_medians(values[:BATCHES]) == values[:BATCHES]
    low, high, reached = rounds_interval(values[:BATCHES])
    assert (low, high, reached) == median_interval(values[:BATCHES])
