"""``GET history``'s columns: min/mean/max over a range, from the ring or from the buckets.

The full-resolution ring (``history.History``) covers the last ``history_s`` at every sample;
the long history's buckets (``buckets.Buckets``) cover a day at ``history_bucket_s``. A range
is folded from the ring where the resolution asked for is finer than a bucket (and the ring
still covers it), else from the buckets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from jupyter_gpu.sampling.buckets import Buckets, choose_resolution, fold_samples
from jupyter_gpu.sampling.history import History


class Cadence(Protocol):
    """The sampler's options that a query needs."""

    @property
    def interval_s(self) -> float: ...

    @property
    def history_s(self) -> float: ...


@dataclass(frozen=True)
class ColumnsQuery:
    """What ``GET history`` asks for as columns.

    Rows after ``since`` (Unix seconds), at ``resolution_s`` or in about ``points`` rows (one of
    them is given); the newest ``limit`` of them.
    """

    since: float | None = None
    resolution_s: float | None = None
    points: int | None = None
    limit: int | None = None


def query_columns(
    history: History, buckets: Buckets, cadence: Cadence, now: float, query: ColumnsQuery
) -> dict[str, Any]:
    """The columns ``query`` asks for, up to ``now``.

    No range reaches further back than the long history: ``since=0`` is the whole day, not 56
    years in one row. Returns the ``series`` JSON shape of ``docs/api.md``; run it off the
    event loop.
    """
    since, resolution_s = query.since, query.resolution_s
    start = max(since if since is not None else 0.0, now - buckets.span_s)
    if resolution_s is None:
        assert query.points is not None
        resolution_s = choose_resolution(
            max(now - start, cadence.interval_s),
            query.points,
            cadence.interval_s,
            buckets.bucket_s,
            cadence.history_s,
        )
    if resolution_s < buckets.bucket_s:
        entries = history.since(since)
        resolution_s = max(resolution_s, cadence.interval_s)
        return fold_samples((e.sample for e in entries), resolution_s, since, query.limit)
    return buckets.query(since, resolution_s, query.limit)
