"""Whether the machine stayed steady: the GPU's clock and processes, read through a probe."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from jupyter_gpu.measure import compare
from jupyter_gpu.measure.machine import MachineWatch, pace_note


@dataclass(frozen=True)
class Proc:
    pid: int


@dataclass(frozen=True)
class Reading:
    sm_clock_mhz: int | None
    processes: tuple[Proc, ...]


class Probe:
    """Plays back readings, as NVML would give them between rounds."""

    def __init__(self, readings: list[Reading | None]) -> None:
        self.readings = readings
        self.reads = 0
        self.closed = False

    def read(self) -> Reading | None:
        reading = self.readings[min(self.reads, len(self.readings) - 1)]
        self.reads += 1
        return reading

    def close(self) -> None:
        self.closed = True


ME = (Proc(os.getpid()),)


def test_a_steady_gpu_gets_no_note() -> None:
    probe = Probe([Reading(1980, ME)])
    notes = MachineWatch(probe).stop()
    assert notes.sm_clock_mhz == (1980, 1980)
    assert notes.other_gpu_pids == ()
    assert not any("GPU" in n for n in notes.notes)
    assert probe.closed


def test_a_clock_that_moved_and_another_process_are_said() -> None:
    probe = Probe([Reading(1980, ME), Reading(1410, (*ME, Proc(4242))), Reading(1980, ME)])
    watch = MachineWatch(probe)
    watch.tick()
    notes = watch.stop()
    assert notes.sm_clock_mhz == (1410, 1980)
    assert any("SM clock moved between 1,410 and 1,980 MHz" in n for n in notes.notes)
    assert notes.other_gpu_pids == (4242,)
    assert any("1 other process(es) used the GPU" in n and "4242" in n for n in notes.notes)


def test_pids_of_another_namespace_are_not_called_other_processes() -> None:
    """NVML lists host pids in a container: this process is not among them, so none is 'other'."""
    probe = Probe([Reading(1980, (Proc(900001), Proc(900002)))])
    notes = MachineWatch(probe).stop()
    assert notes.other_gpu_pids == ()


def test_a_gpu_that_does_not_answer_is_left_out_not_guessed() -> None:
    notes = MachineWatch(Probe([None])).stop()
    assert notes.sm_clock_mhz is None
    assert not any("GPU" in n for n in notes.notes)


def test_compare_reads_the_probe_every_round_and_reports_it() -> None:
    probe = Probe([Reading(1980, ME), Reading(1700, ME)])
    result = compare({"a": lambda: None, "b": lambda: None}, rounds=4, calls=1, probe=probe)
    assert probe.reads == 1 + 4 + 1  # start, each round, stop
    assert result.machine.sm_clock_mhz == (1700, 1980)
    assert not result.machine.steady


def test_a_variant_whose_own_time_moves_is_reported_from_its_rounds() -> None:
    steady = [1e-3] * 12
    assert pace_note({"eager": steady, "compiled": [0.8e-3] * 12}) is None
    # within a quarter: not worth a sentence; too few rounds for thirds: not judged
    assert pace_note({"eager": [1e-3] * 6 + [1.2e-3] * 6}) is None
    assert pace_note({"eager": [1e-3, 2e-3, 3e-3, 4e-3, 5e-3]}) is None
    note = pace_note({"eager": [3.2e-3] * 6 + [5.0e-3] * 6, "compiled": steady})
    assert note is not None
    assert note.startswith("eager took 3.20 ms a call in the first third of the rounds and 5.00 ms")


def test_compare_says_when_a_variant_s_time_moved_and_not_when_it_is_not_watching() -> None:
    calls = {"n": 0}

    def slower_and_slower() -> None:  # 1 ms a call at first, 3 ms by the end
        calls["n"] += 1
        time.sleep(1e-3 if calls["n"] <= 6 else 3e-3)

    variants = {"a": slower_and_slower, "b": lambda: time.sleep(1e-3)}
    watched = compare(variants, device="cpu", rounds=12, calls=1, warmup=1)
    assert any(n.startswith("a took ") and "first third" in n for n in watched.machine.notes)
    assert not watched.machine.steady
    calls["n"] = 0
    unwatched = compare(variants, device="cpu", rounds=12, calls=1, warmup=1, watch=False)
    assert unwatched.machine.notes == ()
