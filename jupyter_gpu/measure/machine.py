"""Whether the machine stayed steady while a comparison was timed, in sentences.

A ratio of two timings holds for the machine it was measured on *as it was then*. Three things
seen in this project's runs make a timing unsteady, and each is read here, not guessed:

- **the GPU's SM clock moved** (power or thermal throttling, a boost that ended): read through
  NVML between rounds (``jupyter_gpu.sampling.probe``); a spread over 5 % is reported;
- **another process on the GPU**: NVML lists the processes that hold memory on it; a process
  other than this one shares the GPU's time (the project's own run read 51 % utilization against
  17 % for the same cell beside another job);
- **the CPUs were saturated by others**: the busy time of this process's CPUs (per-CPU counters,
  as the monitor's host card reads them) less this process tree's own CPU time; reported when
  the CPUs were at least 90 % busy and others took half a CPU or more.

A fourth is read from the timings themselves (:func:`pace_note`): a variant's own time moving by
more than a quarter between the first and the last third of the rounds, which happens with none
of the three above in sight.

The watch never raises and never hangs: a GPU or counter that cannot be read is left out, and
the notes say nothing about it rather than something unmeasured.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import psutil

from .timing import fmt_seconds

#: A spread of the SM clock (max - min over max) above this is reported.
CLOCK_SPREAD = 0.05
#: How far a variant's own time may move between the first and last third of the rounds
#: before it is reported (0.25: by a quarter).
PACE_SPREAD = 0.25
#: Busy share of this process's CPUs above which other processes' time is reported.
CPU_SATURATED = 0.9
#: Other processes' CPU use (in CPUs) below this is not worth a sentence.
CPU_OTHERS_MIN = 0.5


class GpuReading(Protocol):
    """What the watch reads of a GPU (``DeviceSample`` has these)."""

    @property
    def sm_clock_mhz(self) -> float | None: ...

    @property
    def processes(self) -> tuple[object, ...]: ...


class GpuProbe(Protocol):
    """Reads one GPU again and again (``jupyter_gpu.sampling.probe.DeviceProbe``)."""

    def read(self) -> GpuReading | None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class MachineNotes:
    """What the watch saw, and the sentences that say what was not steady (none: steady)."""

    notes: tuple[str, ...] = ()
    #: Lowest and highest SM clock read between rounds (MHz), or ``None`` when not read.
    sm_clock_mhz: tuple[int, int] | None = None
    #: Pids of the other processes NVML listed on the GPU during the timing.
    other_gpu_pids: tuple[int, ...] = ()
    #: CPUs' worth of time other processes took on this process's CPUs, or ``None``.
    cpu_others: float | None = None

    @property
    def steady(self) -> bool:
        return not self.notes


def _process_tree_cpu_s(process: psutil.Process) -> float:
    """CPU seconds of this process, its exited children and its live descendants."""
    try:
        t = process.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
    except psutil.Error:
        return 0.0
    try:
        children = process.children(recursive=True)
    except psutil.Error:
        children = []
    for child in children:
        try:
            c = child.cpu_times()
            total += c.user + c.system
        except psutil.Error:
            continue  # it ended between the listing and the read
    return total


class _CpuWatch:
    """Busy CPU time on this process's CPUs, and this process tree's own share of it."""

    def __init__(self) -> None:
        self._process = psutil.Process()
        try:
            self._cpus = sorted(self._process.cpu_affinity() or [])
        except (AttributeError, psutil.Error):  # not on Linux
            self._cpus = []
        self._start = self._read()

    def _read(self) -> tuple[float, float, float, float]:
        """(monotonic s, busy CPU s, all CPU s, own CPU s) on this process's CPUs."""
        times = psutil.cpu_times(percpu=True)
        cpus = [i for i in self._cpus if i < len(times)] or range(len(times))
        busy = total = 0.0
        for i in cpus:
            t = times[i]
            all_time = sum(t)
            total += all_time
            busy += all_time - t.idle - getattr(t, "iowait", 0.0)
        return time.monotonic(), busy, total, _process_tree_cpu_s(self._process)

    def stop(self) -> tuple[float, float, int] | None:
        """(busy share of the CPUs, others' CPUs' worth, CPU count), or ``None`` if unread."""
        start, end = self._start, self._read()
        wall = end[0] - start[0]
        total = end[2] - start[2]
        if wall <= 0 or total <= 0:
            return None
        busy = end[1] - start[1]
        own = end[3] - start[3]
        count = len(self._cpus) or psutil.cpu_count() or 1
        return busy / total, max(0.0, (busy - own) / wall), count


class MachineWatch:
    """Watch the machine while a comparison runs: :meth:`tick` between rounds, then :meth:`stop`.

    Args:
        gpu: a probe of the GPU the code runs on, or ``None`` (a CPU timing, or no NVML).
    """

    def __init__(self, gpu: GpuProbe | None = None) -> None:
        self._gpu = gpu
        self._clocks: list[int] = []
        self._others: set[int] = set()
        self._cpu = _CpuWatch()
        self.tick()

    def tick(self) -> None:
        """Read the GPU now (a few NVML calls; nothing without a probe)."""
        if self._gpu is None:
            return
        reading = self._gpu.read()
        if reading is None:
            return
        if reading.sm_clock_mhz is not None:
            self._clocks.append(int(reading.sm_clock_mhz))
        own = _own_pids()
        listed = {pid for p in reading.processes if (pid := getattr(p, "pid", None)) is not None}
        # This process uses the GPU, so NVML lists it: if it does not, NVML's pids are another
        # pid namespace's (a container), and no process can be told apart from this one.
        if listed & own:
            self._others |= listed - own

    def stop(self) -> MachineNotes:
        """Read once more, release the probe, and say what was not steady."""
        self.tick()
        if self._gpu is not None:
            self._gpu.close()
            self._gpu = None
        notes: list[str] = []
        clocks = (min(self._clocks), max(self._clocks)) if self._clocks else None
        if (
            clocks is not None
            and clocks[1] > 0
            and (clocks[1] - clocks[0]) / clocks[1] > (CLOCK_SPREAD)
        ):
            notes.append(
                f"the GPU's SM clock moved between {clocks[0]:,} and {clocks[1]:,} MHz while it "
                "was timed (power or thermal throttling, or a boost that ended)"
            )
        if self._others:
            pids = ", ".join(str(p) for p in sorted(self._others)[:4])
            notes.append(
                f"{len(self._others)} other process(es) used the GPU while it was timed "
                f"(pid {pids}): they share its time"
            )
        cpu = self._cpu.stop()
        cpu_others = None
        if cpu is not None:
            busy_share, cpu_others, count = cpu
            if busy_share >= CPU_SATURATED and cpu_others >= CPU_OTHERS_MIN:
                notes.append(
                    f"other processes kept {cpu_others:.1f} of this process's {count} CPUs busy "
                    f"while it was timed ({busy_share:.0%} busy in all)"
                )
        return MachineNotes(tuple(notes), clocks, tuple(sorted(self._others)), cpu_others)


def _own_pids() -> set[int]:
    """This process and its descendants (DataLoader workers are the step's own)."""
    me = psutil.Process()
    pids = {me.pid}
    with contextlib.suppress(psutil.Error):
        pids |= {c.pid for c in me.children(recursive=True)}
    return pids


def cuda_probe(device_index: int) -> GpuProbe | None:
    """A probe of the CUDA device torch calls ``device_index``, or ``None`` without NVML.

    Matched by UUID, so ``CUDA_VISIBLE_DEVICES`` and MIG numbering cannot pick the wrong GPU.
    """
    import torch

    from jupyter_gpu.sampling.probe import DeviceProbe

    uuid = str(getattr(torch.cuda.get_device_properties(device_index), "uuid", "") or "")
    probe = DeviceProbe(uuid or None)
    if probe.index is None:
        probe.close()
        return None
    return probe


def pace_note(times_s: Mapping[str, Sequence[float]]) -> str | None:
    """A sentence when a variant's own time moved by more than ``PACE_SPREAD`` while timed.

    The median of its first third of rounds against that of its last third. Nothing the watch
    reads need change for this to happen (on one H100 a GPT forward went from 3.2 to 5.0 ms a
    call within one bench, NVML's SM clock at 1,980 MHz throughout): the machine's pace moved.
    The ratio pairs each round, so it holds; the times printed beside it are medians over both.
    """
    moved = []
    for name, times in times_s.items():
        third = len(times) // 3
        if third < 2:
            continue
        first, last = statistics.median(times[:third]), statistics.median(times[-third:])
        if min(first, last) > 0 and max(first, last) / min(first, last) > 1 + PACE_SPREAD:
            moved.append((max(first, last) / min(first, last), name, first, last))
    if not moved:
        return None
    _, name, first, last = max(moved)
    return (
        f"{name} took {fmt_seconds(first)} a call in the first third of the rounds and "
        f"{fmt_seconds(last)} in the last (the machine's pace moved: each round pairs variants "
        "timed side by side, so the ratio holds; the times are medians over the whole)"
    )
