"""Our own background work waits while a figure is timed (``jupyter_gpu/measure/quiet.py``).

The compile-cache walk of ``%compile`` runs in a thread of the notebook's process; beside
``compare()`` it slowed every timed call (``benchmarks/background_walk.py``). These check that
every timer of ours holds the gate, that a waiting thread goes on when the timing ends (an
error included), and that the walk really stops at it.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from jupyter_gpu.magics.compile.cache_walk import CacheSizer
from jupyter_gpu.measure import compare, time_back_to_back, time_first_call, time_steady
from jupyter_gpu.measure.quiet import pause_while_timing, timing_in_progress, timing_now
from tests.helpers import load_script

ROOT = Path(__file__).resolve().parents[3]


def _waiter() -> tuple[threading.Thread, threading.Event]:
    """A background thread that waits at the gate, and the event it sets once past it."""
    past = threading.Event()

    def work() -> None:
        pause_while_timing()
        past.set()

    return threading.Thread(target=work, daemon=True), past


def test_nothing_waits_while_nothing_is_timed() -> None:
    assert not timing_now()
    assert pause_while_timing() == 0.0


def test_background_work_waits_until_the_last_timed_stretch_ends() -> None:
    thread, past = _waiter()
    with timing_in_progress():
        with timing_in_progress():  # nested: compare() times a first call inside itself
            thread.start()
            assert not past.wait(0.2)
        assert not past.wait(0.2)  # the outer stretch still times
    assert past.wait(5)
    assert not timing_now()


def test_an_error_in_the_timed_code_lets_the_background_go_on() -> None:
    thread, past = _waiter()
    held: list[bool] = []

    def timed_step_that_fails() -> None:
        with timing_in_progress():
            thread.start()
            held.append(not past.wait(0.1))
            raise RuntimeError("the user's step failed")

    with pytest.raises(RuntimeError):
        timed_step_that_fails()
    assert held == [True]
    assert past.wait(5)
    assert not timing_now()


def test_the_thread_that_times_never_waits_for_itself() -> None:
    with timing_in_progress():
        assert pause_while_timing() == 0.0  # work inside its own timed stretch goes on
    thread, past = _waiter()
    with timing_in_progress():
        thread.start()
        assert pause_while_timing() == 0.0
        assert not past.wait(0.2)  # another thread still waits
    assert past.wait(5)


TIMERS: dict[str, Callable[[Callable[[], object]], object]] = {
    "compare": lambda fn: compare({"a": fn, "b": fn}, device="cpu", rounds=2, watch=False),
    "time_steady": lambda fn: time_steady(fn, runs=2, device="cpu"),
    "time_back_to_back": lambda fn: time_back_to_back(fn, calls=2, runs=2, device="cpu"),
    "time_first_call": lambda fn: time_first_call(fn, device="cpu"),
}


@pytest.mark.parametrize("timer", sorted(TIMERS))
def test_every_timer_holds_the_gate_while_it_calls_the_step(timer: str) -> None:
    seen: list[bool] = []
    TIMERS[timer](lambda: seen.append(timing_now()))
    assert seen
    assert all(seen)
    assert not timing_now()


def test_the_compile_cache_walk_stops_while_a_figure_is_timed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The synthetic cache of benchmarks/compile_cache_walk.py: 100 files in about as many folders.
    walk_bench = load_script(ROOT / "benchmarks" / "compile_cache_walk.py")
    total = walk_bench.build_cache(tmp_path / "inductor", 100)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # torch's default folder: none here
    sizer = CacheSizer()  # the real walk, as %compile runs it
    with timing_in_progress():
        walk = sizer.refresh()
        # Unpaused, 100 files are walked in milliseconds; here the walk waits at a folder.
        assert walk.wait(0.5) == (False, None)
    done, size = walk.wait(10)
    assert done
    assert size == total
