"""One device record from readings of three cadences, each with its age; stale ones left out.

A device's readings come in three groups, each read on its own cadence by its own reader
(``deadline.py``): the fast readings every tick (utilization, memory, power, temperature,
clocks, processes), the GPM metrics every ``gpm_interval_s``, PCIe throughput every
``slow_interval_s``. A sample merges the latest of each and says how old each is
(``read_age_s``, ``gpm_age_s``, ``pcie_age_s``: seconds from the read to the sample's ``ts``).
A group older than two of its own intervals (and than ``MIN_STALE_S``) is stale: its name is
in ``stale`` and its fields are ``None`` in that sample, so no client (nor Prometheus, which
leaves ``None`` out) can take an old value for a live one. A not-responding GPU's fast group is
always stale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from jupyter_gpu.readings.deadline import FastReading, Timed
from jupyter_gpu.readings.records import (
    FAST_READINGS,
    GPM_FIELDS,
    PCIE_FIELDS,
    DeviceSample,
    GpmReading,
    ReadingGroup,
)

PcieReading = tuple[float | None, float | None]
"""``(pcie_tx_bytes_per_s, pcie_rx_bytes_per_s)`` of one GPU."""
GpmReadings = Mapping[int, GpmReading]
SlowReadings = Mapping[int, PcieReading]

FAST_FIELDS = (*FAST_READINGS, "processes")
MIN_STALE_S = 1.0
"""No reading is stale younger than this. At the fastest cadences (0.1 s) two intervals are
0.2 s, which a busy machine's scheduling alone exceeds: readings flickered to null in tests on
two busy cores while nothing hung. At the default 1 s cadence two intervals (2 s) apply."""

GROUP_FIELDS: Mapping[ReadingGroup, tuple[str, ...]] = MappingProxyType(
    {"fast": FAST_FIELDS, "gpm": GPM_FIELDS, "pcie": PCIE_FIELDS}
)
"""The ``DeviceSample`` fields of each group (``stale`` names groups)."""


@dataclass(frozen=True, slots=True)
class StaleAfter:
    """Seconds after which each group's reading is stale (by default: never by age)."""

    fast_s: float = math.inf
    gpm_s: float = math.inf
    pcie_s: float = math.inf

    @classmethod
    def two_intervals(cls, fast_s: float, gpm_s: float, pcie_s: float) -> StaleAfter:
        """Stale after two of each group's own intervals, and ``MIN_STALE_S`` at least."""

        def limit(interval_s: float) -> float:
            return max(2.0 * interval_s, MIN_STALE_S)

        return cls(limit(fast_s), limit(gpm_s), limit(pcie_s))


def with_slow_readings(
    devices: tuple[DeviceSample, ...], slow: SlowReadings
) -> tuple[DeviceSample, ...]:
    """The devices with the PCIe throughput of ``slow`` (bytes/s, by device index) filled in.

    The slow reading can be older than the devices' reading: a GPU lost since, or a field this
    reading found unavailable, keeps what this reading saw.
    """
    out = []
    for d in devices:
        if d.state != "ok":
            out.append(d)
            continue
        tx, rx = slow.get(d.index, (None, None))
        if "pcie_tx_bytes_per_s" in d.unavailable:
            tx = None
        if "pcie_rx_bytes_per_s" in d.unavailable:
            rx = None
        out.append(replace(d, pcie_tx_bytes_per_s=tx, pcie_rx_bytes_per_s=rx))
    return tuple(out)


def with_gpm_readings(
    devices: tuple[DeviceSample, ...], gpm: GpmReadings
) -> tuple[DeviceSample, ...]:
    """The devices with their GPM metrics (``GpmReading`` by device index) filled in.

    A device without a reading yet keeps ``None`` (its first GPM window has not ended); a
    device that is not ``ok`` is left as it is.
    """
    out = []
    for d in devices:
        reading = gpm.get(d.index)
        if d.state != "ok" or reading is None:
            out.append(d)
            continue
        values = {f: reading.values.get(f) for f in GPM_FIELDS}
        for f in GPM_FIELDS:  # a fault or refusal seen by this tick wins over an older reading
            if f in d.unavailable:
                values[f] = None
        unavailable = d.unavailable
        extra = {f: r for f, r in reading.unavailable.items() if f not in d.unavailable}
        if extra:
            unavailable = MappingProxyType({**d.unavailable, **extra})
        out.append(
            replace(
                d,
                sm_active_pct=values["sm_active_pct"],
                sm_occupancy_pct=values["sm_occupancy_pct"],
                tensor_active_pct=values["tensor_active_pct"],
                dram_bw_pct=values["dram_bw_pct"],
                unavailable=unavailable,
            )
        )
    return tuple(out)


def _age(now: float, at: float | None) -> float | None:
    return None if at is None else round(max(0.0, now - at), 3)


def with_ages(
    device: DeviceSample,
    ages: Mapping[ReadingGroup, float | None],
    stale_after: StaleAfter,
) -> DeviceSample:
    """``device`` with each group's age, ``stale`` named and the stale groups' fields ``None``."""
    limits: dict[ReadingGroup, float] = {
        "fast": stale_after.fast_s,
        "gpm": stale_after.gpm_s,
        "pcie": stale_after.pcie_s,
    }
    stale: list[ReadingGroup] = []
    for group in ("fast", "gpm", "pcie"):
        age, limit = ages.get(group), limits[group]
        old = age is not None and age > limit
        if old or (group == "fast" and device.state == "not_responding"):
            stale.append(group)
    cleared: dict[str, Any] = {}
    for group in stale:
        for name in GROUP_FIELDS[group]:
            cleared[name] = () if name == "processes" else None
    return replace(
        device,
        read_age_s=ages.get("fast"),
        gpm_age_s=ages.get("gpm"),
        pcie_age_s=ages.get("pcie"),
        stale=tuple(stale),
        **cleared,
    )


def merge_readings(
    fast: Sequence[FastReading],
    gpm: Mapping[int, Timed[GpmReading]],
    pcie: Mapping[int, Timed[PcieReading]],
    now: float,
    stale_after: StaleAfter,
) -> tuple[DeviceSample, ...]:
    """Every device's record, with its latest GPM and PCIe readings and each group's age.

    The ages are to monotonic ``now`` (the moment the sample's ``ts`` is taken). A GPM or PCIe
    reading that carries no value (a GPU without GPM: every field "Not Supported") has no age.
    """
    devices = tuple(d for d, _ in fast)
    devices = with_gpm_readings(devices, {i: t.value for i, t in gpm.items()})
    if pcie:
        devices = with_slow_readings(devices, {i: t.value for i, t in pcie.items()})
    out = []
    for device, (_, at) in zip(devices, fast, strict=True):
        g = gpm.get(device.index)
        p = pcie.get(device.index)
        ages: dict[ReadingGroup, float | None] = {
            "fast": _age(now, at),
            "gpm": _age(now, g.at) if g is not None and g.value.values else None,
            "pcie": _age(now, p.at) if p is not None and p.value != (None, None) else None,
        }
        out.append(with_ages(device, ages, stale_after))
    return tuple(out)
