"""One profiled step that a busy machine's interruptions do not bend (``profile_one_call``).

On CI a step of convolutions was once profiled while another process held the core: the wait
landed in some other op, convolutions read 2 % of the step, and ``%tune`` left channels_last
untried. Here the interruption is an op of our own that waits on the first call only; the
convolution around it is real.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import torch

from jupyter_gpu.magics.probes.evidence import CallProfile, profile_calls, profile_one_call
from jupyter_gpu.magics.tune.evidence import SMALL_SHARE


@torch.library.custom_op("jupyter_gpu_test::interrupted", mutates_args=())
def interrupted(t: torch.Tensor, wait_s: float) -> torch.Tensor:
    """An op that takes ``wait_s`` longer than it should, as if the process lost its core."""
    time.sleep(wait_s)
    return t.clone()


class Step:
    """A convolution and its backward; the calls in ``waits`` are interrupted for that long."""

    def __init__(self, waits: dict[int, float]) -> None:
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(8, 32, 3, padding=1)
        self.x = torch.randn(16, 8, 24, 24)
        self.waits: dict[int, float] = {}
        self.calls = 0
        self()  # oneDNN's first-call set-up, outside the profiles
        self.waits, self.calls = waits, 0

    def __call__(self) -> None:
        wait = self.waits.get(self.calls, 0.0)
        self.calls += 1
        out = self.conv(self.x)
        interrupted(self.x, wait)
        out.mean().backward()


def conv_share(profile: CallProfile | None) -> float:
    assert profile is not None, "the profiler did not run"
    return profile.matmul_s(conv=True) / profile.busy_s


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One intra-op thread, as %tune's CPU steps in the tests: two threads beside other busy
    processes wait on each other at every op (the convolution once took 83 ms, not 2)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_an_interrupted_call_does_not_hide_the_convolutions(one_thread: None) -> None:
    # The wait lands in our op: the first call, profiled alone, is nearly all that op.
    assert conv_share(profile_calls(Step({0: 1.0}), calls=1)) < SMALL_SHARE
    step = Step({0: 1.0})
    least = profile_one_call(step, within_s=3.0)
    assert step.calls > 1
    # About 0.6 on a quiet machine; on a busy one every call can lose its core for a moment, and
    # CI's two cores, under the suite and the browser tests, once read 0.21 (2026-12-05). What
    # matters is that %tune still sees the convolutions: twice the share below which it tries no
    # fix. Without profile_one_call this reads the first call's share, under SMALL_SHARE.
    assert conv_share(least) > 2 * SMALL_SHARE


def test_a_long_step_is_profiled_once() -> None:
    step = Step({0: 0.6, 1: 0.6})
    assert profile_one_call(step, within_s=0.5) is not None
    assert step.calls == 1
