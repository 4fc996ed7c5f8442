"""One GPU's record from the latest reading of each group (``catalog.GROUPS``).

The groups are read on cadences of their own (the sampler's rounds, ``read_once``'s window);
this puts their latest readings together, with no ages yet (``sampling/freshness.py`` adds
them, and leaves stale ones out).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from jupyter_gpu.readings import catalog
from jupyter_gpu.readings.records import DeviceInfo, DeviceSample, GroupReading


def device_record(
    info: DeviceInfo,
    tick: GroupReading,
    others: Mapping[str, GroupReading],
    layout: catalog.Layout | None = None,
) -> DeviceSample:
    """The record of GPU ``info`` from its tick group's reading and the others' latest.

    The tick group's reading (``fast``) says the GPU's state, its processes and what NVML
    refused this tick. The other groups' values fill in only while the GPU is ``ok``, and a
    field this tick found unavailable stays ``None`` (a fault or refusal seen now wins over an
    older reading); their own reasons follow the tick's in ``unavailable``. A group without a
    reading (``others`` lacks it) leaves its fields ``None``.
    """
    made = layout if layout is not None else catalog.layout()
    values: list[float | None] = [None] * len(made.metrics)
    refused = tick.unavailable
    added: dict[str, str] = {}
    for group in made.groups:
        reading = tick if group.tick else others.get(group.name)
        if reading is None or (not group.tick and tick.state != "ok"):
            continue
        for metric in made.group_metrics[group.name]:
            if group.tick or metric.field not in refused:
                values[made.metric_index[metric.field]] = reading.values.get(metric.field)
        if not group.tick:
            for name, reason in reading.unavailable.items():
                if name not in refused:
                    added.setdefault(name, reason)
    return DeviceSample(
        info.index,
        info.uuid,
        info.name,
        state=tick.state,
        error=tick.error,
        values=tuple(values),
        processes=tick.processes,
        unavailable=MappingProxyType({**refused, **added}) if added else refused,
        stale_s=tick.stale_s,
        layout=made,
    )
