"""``profile_calls`` (the tutorials' one profiler run) gives no false "started again" warning.

torch 2.10 and 2.11 warn "Profiler clears events at the end of each cycle" from every new
``torch.profiler.profile`` made without ``acc_events`` (pytorch#180348): notebook 01's
``gpu_busy_per_call`` made the extension print "a torch.profiler.profile object was started
again" on the H200, where nothing was restarted. torch 2.13 (this machine) no longer warns, so
the test puts torch 2.11's condition back into ``prepare_trace``.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.profiler import ProfilerActivity, profile
from torch.profiler import profiler as torch_profiler

from jupyter_gpu.tutorials.timing import profile_calls

TORCH_2_11_WARNING = (
    "Warning: Profiler clears events at the end of each cycle.Only events from the current "
    "cycle will be reported.To keep events across cycles, set acc_events=True."
)


@pytest.fixture
def warns_as_torch_2_11(monkeypatch: pytest.MonkeyPatch) -> None:
    original = torch_profiler._KinetoProfile.prepare_trace

    def prepare_trace(self: torch_profiler._KinetoProfile) -> None:
        original(self)
        if self.profiler is not None and not self.acc_events:  # torch 2.11's check, after
            warnings.warn(TORCH_2_11_WARNING, stacklevel=2)  # the profiler is made

    monkeypatch.setattr(torch_profiler._KinetoProfile, "prepare_trace", prepare_trace)


def _clears_events(seen: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in seen if "clears events" in str(w.message)]


@pytest.mark.usefixtures("warns_as_torch_2_11")
def test_a_bare_fresh_profiler_warns_as_in_torch_2_11() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with profile(activities=[ProfilerActivity.CPU]):
            torch.ones(4).sum()
    assert _clears_events(seen), "the fixture must reproduce the false warning"


@pytest.mark.usefixtures("warns_as_torch_2_11")
def test_profile_calls_runs_once_without_the_warning_and_keeps_the_events() -> None:
    calls = []

    def step() -> None:
        calls.append(1)
        torch.ones(4).sum()

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        prof = profile_calls(step, calls=3, activities=[ProfilerActivity.CPU])
    assert _clears_events(seen) == []
    assert len(calls) == 3
    assert sum(e.name == "aten::sum" for e in prof.events()) == 3
