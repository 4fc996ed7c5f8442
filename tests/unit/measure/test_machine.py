"""Whether the machine stayed steady: the GPU's clock and processes, read through a probe."""

from __future__ import annotations

import os
from dataclasses import dataclass

from jupyter_gpu.measure import compare
from jupyter_gpu.measure.machine import MachineWatch


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
