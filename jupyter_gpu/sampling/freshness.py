"""One device record from readings of several cadences, each with its age; stale ones left out.

A device's readings come in the groups of ``readings/catalog.py``, each read on its own cadence
by its own reader (``deadline.py``): the fast readings every tick (utilization, memory, power,
temperature, clocks, processes), the GPM metrics every ``gpm_interval_s``, PCIe throughput
every ``slow_interval_s``... A sample merges the latest of each (``readings/merge.py``) and
says how old each is (its group's age field: ``read_age_s``, ``gpm_age_s``, ``pcie_age_s``...:
seconds from the read to the sample's ``ts``). A group older than two of its own intervals (and
than ``MIN_STALE_S``) is stale: its name is in ``stale`` and its fields are ``None`` in that
sample, so no client (nor Prometheus, which leaves ``None`` out) can take an old value for a
live one. A not-responding GPU's tick group is always stale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from jupyter_gpu.readings import catalog
from jupyter_gpu.readings.deadline import FastReading, Timed
from jupyter_gpu.readings.merge import device_record
from jupyter_gpu.readings.records import DeviceInfo, DeviceSample, GroupReading

GroupAnswers = Mapping[str, Mapping[int, Timed[GroupReading]]]
"""Each group's latest reading of each device (by index), with when it was taken."""

MIN_STALE_S = 1.0
"""No reading is stale younger than this. At the fastest cadences (0.1 s) two intervals are
0.2 s, which a busy machine's scheduling alone exceeds: readings flickered to null in tests on
two busy cores while nothing hung. At the default 1 s cadence two intervals (2 s) apply."""


@dataclass(frozen=True, slots=True)
class StaleAfter:
    """Seconds after which each group's reading is stale, by group (a group not named: never)."""

    limits_s: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def two_intervals(cls, intervals_s: Mapping[str, float]) -> StaleAfter:
        """Stale after two of each group's own intervals, and ``MIN_STALE_S`` at least."""
        return cls(MappingProxyType({g: max(2.0 * s, MIN_STALE_S) for g, s in intervals_s.items()}))

    def limit_s(self, group: str) -> float:
        """The age past which ``group`` is stale."""
        return self.limits_s.get(group, math.inf)


def _age(now: float, at: float | None) -> float | None:
    return None if at is None else round(max(0.0, now - at), 3)


def with_ages(
    device: DeviceSample, ages: Sequence[float | None], stale_after: StaleAfter
) -> DeviceSample:
    """``device`` with each group's age (in the catalog's order), stale groups' fields ``None``."""
    made = device.layout
    stale = tuple(
        group.name
        for group, age in zip(made.groups, ages, strict=True)
        if (age is not None and age > stale_after.limit_s(group.name))
        or (group.tick and device.state == "not_responding")
    )
    if not stale:
        return replace(device, ages=tuple(ages))
    values = list(device.values)
    processes = device.processes
    for name in stale:
        group = made.group(name)
        for metric in made.group_metrics[name]:
            if not metric.capacity:
                values[made.metric_index[metric.field]] = None
        if group.tick:  # the processes are the tick group's readings too
            processes = ()
    return replace(device, values=tuple(values), processes=processes, ages=tuple(ages), stale=stale)


def merge_readings(
    devices: Sequence[DeviceInfo],
    fast: Sequence[FastReading],
    groups: GroupAnswers,
    now: float,
    stale_after: StaleAfter,
) -> tuple[DeviceSample, ...]:
    """Every device's record, with its latest reading of each group and each group's age.

    ``fast`` is the tick group's reading of each of ``devices``, in order; ``groups`` the
    others' latest answers. The ages are to monotonic ``now`` (the moment the sample's ``ts``
    is taken). A reading that carries no value (a GPU without GPM: every field "Not
    Supported") has no age.
    """
    made = catalog.layout()
    out = []
    for info, (tick, at) in zip(devices, fast, strict=True):
        latest = {
            name: answers[info.index] for name, answers in groups.items() if info.index in answers
        }
        device = device_record(info, tick, {n: t.value for n, t in latest.items()}, made)
        ages = [
            _age(now, at)
            if group.tick
            else _age(now, t.at)
            if (t := latest.get(group.name)) is not None and t.value.has_values
            else None
            for group in made.groups
        ]
        out.append(with_ages(device, ages, stale_after))
    return tuple(out)
