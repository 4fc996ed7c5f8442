"""A profiler whose schedule makes each run of the code a step, and the pass that runs them.

``%%profile --warmup W --steps N`` and ``%tune``'s profile of the step as it is both measure
steady steps this way: the runs before the last warm-up one run without the profiler, the last
warm-up run with it started but not recording, then N recorded steps, each closed by
``profile.step()`` (torch's ``ProfilerStep#n`` range, which the idle window and Holistic Trace
Analysis read).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jupyter_gpu.magics.shell.kineto import kineto_quiet
from jupyter_gpu.measure.quiet import timing_in_progress

if TYPE_CHECKING:
    import torch


def step_profiler(
    *, warmup: int, steps: int, cuda: bool, memory: bool = False, stack: bool = False
) -> torch.profiler.profile:
    """A ``torch.profiler.profile`` whose schedule makes each run of the code a step.

    ``schedule(skip_first=W-1, wait=0, warmup=1, active=N, repeat=1)`` for ``warmup`` W >= 1:
    the runs before the last warm-up one run without the profiler, the last warm-up run with it
    started but not recording (torch's WARMUP: its start-up costs fall there), then N recorded
    steps; with no warm-up the profiler starts before the first step, outside its range.
    ``profile.step()`` closes each ``ProfilerStep#n`` range (torch's step marker, which Holistic
    Trace Analysis reads too). ``memory`` records allocations, ``stack`` Python stacks.
    """
    import torch  # loaded already: the magic imported it

    activities = [torch.profiler.ProfilerActivity.CPU]
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with warnings.catch_warnings():
        # warmup=0 warns that results may skew: the profiler's start falls outside the steps
        warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
        schedule = torch.profiler.schedule(
            skip_first=max(0, warmup - 1),
            wait=0,
            warmup=1 if warmup else 0,
            active=steps,
            repeat=1,
        )
    # torch 2.13's first record_function in a process imports torch.profiler._cupti_monitor;
    # inside a --stack trace that import's module frame is recorded, its code object freed, and
    # the trace read back with the freed bytes as a name (a UnicodeDecodeError, 7 of 20 fresh
    # runs of one --stack cell, 2026-12-08). The step markers are record_functions: one here,
    # before any trace, makes that import happen outside it.
    with torch.autograd.profiler.record_function("jupyter_gpu: before the profile"):
        pass
    # acc_events: one cycle, so nothing to accumulate; without it torch 2.11 warns that the
    # profiler "clears events at the end of each cycle", about a cycle the user never ran.
    return torch.profiler.profile(
        activities=activities,
        schedule=schedule,
        profile_memory=memory,
        with_stack=stack,
        acc_events=True,
        experimental_config=stack_config() if stack else None,
    )


class UnreadableTrace(UnicodeDecodeError):
    """torch's profiler met a garbled event name reading back its own trace.

    torch 2.13 with ``--stack``: the parse at the end of the recorded steps reads a name from
    bytes that are no longer a name (``UnicodeDecodeError``), always a module's frame
    (``torch/profiler/_cupti_monitor.py(0)``), as far as we can tell one imported for the first
    time inside the trace: :func:`step_profiler` makes torch's own such import happen before the
    trace, and 7 of 20 fresh runs garbled before, 0 of 20 after. pytorch/pytorch#136180 saw the
    same name for ``torch/_inductor/config.py``, #136040 the error. A cell that imports a module
    for the first time may still meet it, and runs again cleanly. The runs had all finished;
    ``value`` is the last one's. A subclass, so that a handler of torch's parse errors catches it
    too, while the code's own ``UnicodeDecodeError`` stays the code's.
    """

    value: Any = None


def _profilers_own(call: Callable[[], object], value: Any) -> None:
    """One of the profiler's own calls (``step``, ``stop``), a garbled trace raised as such."""
    try:
        call()
    except UnicodeDecodeError as err:
        lost = UnreadableTrace(err.encoding, err.object, err.start, err.end, err.reason)
        lost.value = value
        raise lost from err


def profiled_pass(
    prof: torch.profiler.profile, run: Callable[[], Any], warmup: int, steps: int
) -> Any:
    """Run the code ``warmup + steps`` times under ``prof``, a profiler step after each.

    Returns the last run's value. The profiler's own start and stop, and the steps that start
    or stop its trace, run with kineto's log lines kept out of the output
    (``shell/kineto.py``); the steps between measured runs do not, so that its few syscalls
    stay out of the measured window, and the user's code never does. It stops even if the code
    raises, and the code's error is the one that goes on.

    Raises:
        UnreadableTrace: torch could not read back its trace; the runs had all finished.
    """
    with timing_in_progress():  # our own background work waits meanwhile (measure/quiet.py)
        with kineto_quiet():
            prof.start()
        value = None
        try:
            for done in range(1, warmup + steps + 1):
                value = run()
                if warmup < done < warmup + steps:  # between two measured steps: no transition
                    _profilers_own(prof.step, value)
                    continue
                with kineto_quiet():
                    _profilers_own(prof.step, value)
        except BaseException:
            with kineto_quiet(), contextlib.suppress(UnicodeDecodeError):
                prof.stop()  # a garbled trace must not replace the error that stopped the runs
            raise
        with kineto_quiet():
            _profilers_own(prof.stop, value)
    return value


def stack_config() -> torch._C._profiler._ExperimentalConfig | None:
    """The profiler's experimental config for ``--stack``: ``verbose`` on.

    torch 2.11 records no Python-function events with ``with_stack`` (on Python 3.11 and 3.12
    alike) and puts the Python stacks on its events only with ``verbose``; torch 2.13 records
    both either way. ``None`` (torch's default) where the option is missing.
    """
    import torch  # loaded already: the magic imported it

    try:
        return torch._C._profiler._ExperimentalConfig(verbose=True)
    except (AttributeError, TypeError):
        return None
