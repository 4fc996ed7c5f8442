"""CUDA_LAUNCH_BLOCKING's helpers, on the CPU: the children's protocol, pairing and error lines.

On a CPU the variable changes nothing, so these tests check the machinery (two fresh children
timed in turns, a paired ratio over the rounds; the error child's line numbers) and the GPU test
(tests/gpu/test_tutorial_lessons_gpu.py) checks the lesson itself.
"""

from __future__ import annotations

import pytest

from jupyter_gpu.tutorials.launch_blocking import error_location, launch_blocking_cost

pytestmark = pytest.mark.slow  # each test starts Python processes that import torch


def test_two_children_are_timed_in_turns_and_paired() -> None:
    cost = launch_blocking_cost(device="cpu", rounds=3, launches=20)
    assert cost.default.runs == cost.blocking.runs == 3
    assert cost.ratio.rounds == 3
    assert cost.ratio.variant == "blocking"
    assert cost.ratio.baseline == "default"
    assert all(t > 0 for t in cost.default.times_s + cost.blocking.times_s)
    assert "with CUDA_LAUNCH_BLOCKING=1" in cost.describe()


def test_rounds_and_launches_are_checked_before_any_child_starts() -> None:
    with pytest.raises(ValueError, match="rounds and launches"):
        launch_blocking_cost(device="cpu", rounds=0)


def test_the_error_child_reports_the_line_that_raised() -> None:
    found = error_location(device="cpu", blocking=False)
    lines = dict(found.source)
    assert "# the faulty launch" in lines[found.fault_line]
    # On a CPU nothing is queued: the operator raises at its own line.
    assert found.raised_line == found.fault_line
    assert found.at_the_fault
    assert "out of bounds" in found.error
