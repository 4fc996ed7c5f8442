"""A synthetic past for the simulated GPUs, so that a demo's 1 h and 24 h ranges show something.

For demos and browser tests only (``JupyterGpu.simulated_seed_history_s``): the sampler stores
what this yields before its first tick.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass

from jupyter_gpu.readings import catalog
from jupyter_gpu.readings.merge import device_record
from jupyter_gpu.readings.records import NOT_SCANNED, HostSample, Sample
from jupyter_gpu.simulated.backend import SimulatedBackend


@dataclass(frozen=True)
class PastSpan:
    """How much past to make, and how finely.

    Attributes:
        span_s: seconds of past, up to ``now``.
        history_s: the last seconds of it at full resolution (one sample per ``interval_s``);
            before that, one sample per bucket of the long history (``bucket_s``).
        interval_s: the sampler's interval.
        bucket_s: the long history's bucket width.
    """

    span_s: float
    history_s: float
    interval_s: float
    bucket_s: float


def simulated_past(
    devices: int, span: PastSpan, groups: Collection[str], host: HostSample, now: float
) -> Iterator[tuple[Sample, bool]]:
    """Samples of ``devices`` simulated GPUs over the ``span`` before ``now``, oldest first.

    Each comes with whether it belongs in the full-resolution history (its last ``history_s``)
    or only in the long history's buckets. A second simulated backend, on a stepped clock,
    makes the readings; the groups named in ``groups`` (those the sampler reads) that the long
    history keeps are read too, so that the charts continue across into the live samples.
    ``seq`` counts the full-resolution samples from 1.
    """
    clock = [0.0]
    fake = SimulatedBackend(devices, seed=1, clock=lambda: clock[0])
    made = catalog.layout()
    kept = [
        g.name
        for g in made.groups
        if not g.tick
        and g.name in groups
        and any(m.long_history for m in made.group_metrics[g.name])
    ]
    tick = made.tick_group.name
    infos = fake.info().devices
    start = now - span.span_s
    full_from = now - span.history_s
    step = max(span.bucket_s, span.interval_s)
    t = start
    seq = 0
    while t < now:
        clock[0] = t - start
        fast = fake.read_all(tick)
        others = {name: fake.read_all(name) for name in kept}
        records = tuple(
            device_record(
                info,
                fast[info.index],
                {name: got[info.index] for name, got in others.items() if info.index in got},
                made,
            )
            for info in infos
        )
        full = t >= full_from
        seq += full
        yield (
            Sample(
                seq=seq,
                ts=round(t, 6),
                backend="simulated",
                simulated=True,
                reason=None,
                devices=records,
                host=host,
                compile_cache=NOT_SCANNED,
            ),
            full,
        )
        if full:
            t += span.interval_s
        else:
            t += step if t + step < full_from else max(full_from - t, 1e-3)
