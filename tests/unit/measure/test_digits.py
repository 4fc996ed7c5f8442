"""Three significant digits that read alike at both ends of an interval (``measure/digits.py``)."""

from __future__ import annotations

import pytest

from jupyter_gpu.measure import Ratio, fmt_ratio
from jupyter_gpu.measure.digits import significant, three_digits


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.2, "0.200"),  # .3g printed 0.2 beside 0.197
        (1.3, "1.30"),
        (1.0, "1.00"),
        (12.34, "12.3"),
        (117.0, "117"),  # #.3g prints "117."
        (999.6, "1000"),  # #.3g prints "1.00e+03"
        (0.0123, "0.0123"),
    ],
)
def test_three_digits_keep_their_zeros(value: float, text: str) -> None:
    assert three_digits(value) == text


@pytest.mark.parametrize(
    ("value", "text"), [(638.0, "638.0"), (702.34, "702.3"), (12345.0, "12345"), (9999.7, "10000")]
)
def test_four_significant_digits_keep_their_zeros(value: float, text: str) -> None:
    assert significant(value, 4) == text


def test_an_intervals_ends_read_alike() -> None:
    ratio = Ratio(0.199, 0.197, 0.2, 100, 0.96)
    assert ratio.span() == "0.197-0.200x"
    assert ratio.describe().startswith("5.03x slower (5.00-5.08x slower;")
    assert fmt_ratio(12.34) == "12.3"
    assert fmt_ratio(250.4) == "250"
