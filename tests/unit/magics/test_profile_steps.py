"""The profiles: torch's unreadable trace is told apart from the code's own errors."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from jupyter_gpu.magics.probes.evidence import profile_calls  # noqa: E402
from jupyter_gpu.magics.profile.steps import (  # noqa: E402
    UnreadableTrace,
    profiled_pass,
    step_profiler,
)
from tests.helpers import garble_when_recording_stops  # noqa: E402


def test_the_code_s_own_decode_error_stays_the_code_s_and_the_profiler_stops() -> None:
    def step() -> None:
        b"\xe5".decode()

    prof = step_profiler(warmup=1, steps=2, cuda=False)
    with pytest.raises(UnicodeDecodeError) as raised:
        profiled_pass(prof, step, 1, 2)
    assert not isinstance(raised.value, UnreadableTrace)
    assert not torch.autograd._profiler_enabled()


def test_a_garble_when_the_recording_stops_is_an_unreadable_trace_with_the_last_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    garble_when_recording_stops(monkeypatch)
    runs: list[int] = []
    prof = step_profiler(warmup=1, steps=2, cuda=False)
    with pytest.raises(UnreadableTrace) as raised:
        profiled_pass(prof, lambda: runs.append(len(runs)) or len(runs), 1, 2)
    assert runs == [0, 1, 2]  # every run had finished
    assert raised.value.value == 3
    assert raised.value.reason == "invalid continuation byte"
    assert not torch.autograd._profiler_enabled()


def test_the_profile_behind_a_why_is_lost_not_raised_when_torch_garbles_its_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stop = torch.profiler.profile.stop

    def garbled(self: torch.profiler.profile) -> None:
        stop(self)
        raise UnicodeDecodeError("utf-8", b"\xe5", 0, 1, "invalid continuation byte")

    monkeypatch.setattr(torch.profiler.profile, "stop", garbled)
    x = torch.randn(32, 32)
    assert profile_calls(lambda: x @ x, calls=2) is None  # no evidence, no guess
    assert not torch.autograd._profiler_enabled()

    def step() -> None:
        b"\xe5".decode()

    with pytest.raises(UnicodeDecodeError) as raised:
        profile_calls(step)
    assert raised.value.reason == "unexpected end of data"  # the code's, not the garble's
    assert raised.value.__context__ is None  # the code's own, not the profiler's
    assert not torch.autograd._profiler_enabled()


def test_torch_s_lazy_import_of_its_monitor_happens_before_the_trace() -> None:
    # In a fresh process: torch 2.13's first record_function imports _cupti_monitor, and inside
    # a --stack trace that import garbled the trace read back (7 of 20 fresh runs, 2026-12-08).
    if importlib.util.find_spec("torch.profiler._cupti_monitor") is None:
        pytest.skip("this torch has no _cupti_monitor to import late")
    script = (
        "import sys, torch\n"
        "from jupyter_gpu.magics.profile.steps import step_profiler\n"
        "before = 'torch.profiler._cupti_monitor' in sys.modules\n"
        "step_profiler(warmup=1, steps=1, cuda=False, stack=True)\n"
        "print(before, 'torch.profiler._cupti_monitor' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["False", "True"], done.stderr
