"""The long history: min/mean/max buckets (10 s by default) back to 24 h, at bounded memory.

The full-resolution ring (``history.History``) keeps ``history_s`` (10 min by default). This
keeps every numeric reading the charts draw (the metrics of ``readings/catalog.py`` marked
``long_history``), folded into fixed buckets of ``bucket_s``: per column
(``gpu.<i>.<field>``, ``host.<field>``, ``cache.size_bytes``) four ``float32`` arrays
(min, max, sum, count) of ``span_s / bucket_s`` slots, preallocated when the column first has
a value (a reading the server does not have, a group switched off or a GPU without GPM, costs
nothing). Memory is therefore fixed by the number of columns, never by how long the server
runs: ``slots * (columns * 4 * 4 + 8)`` bytes, 138 KB per reading and GPU over 24 h at 10 s,
9.3 MB for 8 GPUs with the readings charted by default (``memory_bytes`` says it;
``tests/unit/sampling/test_history_buckets.py`` measures it).

The sampler thread calls ``add`` once per tick (a few dozen float updates). ``query`` copies
the arrays under the lock (C-level slices) and folds them into the requested resolution
outside it; the server runs it in a worker thread, never on the event loop.
"""

from __future__ import annotations

import math
import operator
import threading
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jupyter_gpu.readings import catalog
from jupyter_gpu.readings.records import Sample

HOST_COLUMNS = ("host.cpu_pct", "host.mem_used_bytes", "cache.size_bytes")

_NAN = float("nan")
_INF = float("inf")


def _rank(key: str) -> tuple[int, int, int]:
    """Where column ``key`` goes: the host's in ``HOST_COLUMNS``' order, then GPU by GPU."""
    if key in HOST_COLUMNS:
        return (0, 0, HOST_COLUMNS.index(key))
    _, index, field = key.split(".", 2)
    place = catalog.layout().metric_index.get(field, len(catalog.layout().metrics))
    return (1, int(index), place)


def device_fields() -> tuple[str, ...]:
    """The device readings the long history keeps (the catalog's ``long_history`` metrics)."""
    return tuple(m.field for m in catalog.layout().metrics if m.long_history)


_KEYS: dict[tuple[catalog.Layout, int], tuple[tuple[str, int], ...]] = {}


def _device_keys(layout: catalog.Layout, index: int) -> tuple[tuple[str, int], ...]:
    """Each kept column of device ``index`` and its metric's place in a record's values."""
    keys = _KEYS.get((layout, index))
    if keys is None:
        keys = _KEYS[(layout, index)] = tuple(
            (f"gpu.{index}.{m.field}", layout.metric_index[m.field])
            for m in layout.metrics
            if m.long_history
        )
    return keys


def sample_values(sample: Sample) -> Iterable[tuple[str, float | None]]:
    """The ``(column, value)`` pairs one sample contributes; a GPU not ``ok`` gives ``None``."""
    host = sample.host
    cache = sample.compile_cache
    out: list[tuple[str, float | None]] = [
        ("host.cpu_pct", host.cpu_pct),
        ("host.mem_used_bytes", host.mem_used_bytes),
        # An unscanned cache is "not scanned yet", not 0 bytes.
        ("cache.size_bytes", cache.size_bytes if cache.scanned_ts is not None else None),
    ]
    for device in sample.devices:
        keys = _device_keys(device.layout, device.index)
        if device.state == "ok":
            values = device.values
            out.extend((key, values[at]) for key, at in keys)
        else:
            out.extend((key, None) for key, _ in keys)
    return out


@dataclass
class _Column:
    """One reading's buckets: min, max, sum and count of its values (no value: inf, -inf, 0, 0)."""

    mins: array[float]
    maxs: array[float]
    sums: array[float]
    counts: array[float]


@dataclass
class _Open:
    """The bucket being filled: per column ``[min, sum, count, max]``."""

    start: float
    acc: dict[str, list[float]]


class Buckets:
    """min/mean/max of each reading per ``bucket_s``, over the last ``span_s``.

    Args:
        bucket_s: the bucket width in seconds (buckets start at multiples of it, Unix time).
        span_s: how far back buckets are kept.

    Raises:
        ValueError: for a bucket width not above 0 or a span shorter than one bucket.
    """

    def __init__(self, bucket_s: float = 10.0, span_s: float = 86_400.0) -> None:
        if not bucket_s > 0 or span_s < bucket_s:
            raise ValueError(f"bad buckets: bucket_s={bucket_s}, span_s={span_s}")
        self.bucket_s = float(bucket_s)
        self.span_s = float(span_s)
        self.slots = math.ceil(span_s / bucket_s)
        self._starts: array[float] = array("d", [_NAN]) * self.slots
        self._columns: dict[str, _Column] = {}
        self._count = 0  # closed buckets held (at most slots)
        self._head = 0  # the slot the next closed bucket goes to
        self._open: _Open | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Buckets held, the one being filled included."""
        return self._count + (1 if self._open is not None else 0)

    @property
    def columns(self) -> list[str]:
        """The column names seen so far."""
        return list(self._columns)

    def memory_bytes(self) -> int:
        """The bytes held by the arrays (fixed once every column has appeared)."""
        per_column = 4 * self.slots * array("f").itemsize
        return len(self._columns) * per_column + self.slots * self._starts.itemsize

    def add(self, sample: Sample) -> None:
        """Fold one sample into its bucket (closing the previous bucket when it is a new one)."""
        start = math.floor(sample.ts / self.bucket_s) * self.bucket_s
        with self._lock:
            current = self._open
            if current is not None and start != current.start:
                if start < current.start:
                    return  # ts never goes back in a sampler; ignore rather than corrupt
                self._close(current)
                current = None
            if current is None:
                current = self._open = _Open(start, {})
            acc = current.acc
            columns = self._columns
            for key, value in sample_values(sample):
                if value is None:
                    continue
                if key not in columns:
                    self._new_column(key)
                v = float(value)
                slot = acc.get(key)
                if slot is None:
                    acc[key] = [v, v, 1.0, v]
                else:
                    if v < slot[0]:
                        slot[0] = v
                    if v > slot[3]:
                        slot[3] = v
                    slot[1] += v
                    slot[2] += 1.0

    def _new_column(self, key: str) -> None:
        """A column with no value in any bucket yet, in its place among the others.

        The columns are kept in one order whenever each first had a value (the host's, then
        each GPU's in the catalog's order), so that a query's columns come in that order.
        """
        n = self.slots
        self._columns[key] = _Column(
            array("f", [_INF]) * n,
            array("f", [-_INF]) * n,
            array("f", [0.0]) * n,
            array("f", [0.0]) * n,
        )
        ordered = sorted(self._columns.items(), key=lambda kv: _rank(kv[0]))
        self._columns.clear()  # in place: ``add`` holds the dict
        self._columns.update(ordered)

    def _close(self, bucket: _Open) -> None:
        i = self._head
        self._starts[i] = bucket.start
        for key, column in self._columns.items():
            slot = bucket.acc.get(key)
            if slot is None:
                column.mins[i], column.maxs[i] = _INF, -_INF
                column.sums[i] = column.counts[i] = 0.0
            else:
                column.mins[i], column.sums[i], column.counts[i], column.maxs[i] = slot
        self._head = (i + 1) % self.slots
        self._count = min(self._count + 1, self.slots)

    def _ordered(self, values: array[float]) -> array[float]:
        """The closed buckets' values, oldest first (a C-level copy)."""
        if self._count < self.slots:
            return values[: self._count]
        return values[self._head :] + values[: self._head]

    def snapshot(self) -> tuple[array[float], dict[str, tuple[array[float], ...]]]:
        """Bucket starts and each column's (mins, maxs, sums, counts), oldest first.

        The open bucket comes last. Copied under the lock (C-level copies); the arrays are the
        caller's.
        """
        with self._lock:
            starts = self._ordered(self._starts)
            columns: dict[str, tuple[array[float], ...]] = {
                key: (
                    self._ordered(c.mins),
                    self._ordered(c.maxs),
                    self._ordered(c.sums),
                    self._ordered(c.counts),
                )
                for key, c in self._columns.items()
            }
            current = self._open
            if current is not None:
                starts.append(current.start)
                for key, (mins, maxs, sums, counts) in columns.items():
                    lo, total, n, hi = current.acc.get(key, (_INF, 0.0, 0.0, -_INF))
                    mins.append(lo)
                    maxs.append(hi)
                    sums.append(total)
                    counts.append(n)
        return starts, columns

    def query(
        self,
        since: float | None = None,
        resolution_s: float | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """Columns at ``resolution_s`` (rounded up to whole buckets), buckets after ``since``.

        A merged row's min and max are those of its buckets, its mean that of every reading in
        them. ``limit`` keeps the newest rows. Returns the ``series`` JSON shape of
        ``docs/api.md`` (``None`` for a row without readings; columns with none at all are
        left out).
        """
        k = max(1, math.ceil((resolution_s or self.bucket_s) / self.bucket_s - 1e-9))
        starts, columns = self.snapshot()
        fast = fold_contiguous(starts, columns, self.bucket_s, k, since, limit)
        if fast is not None:
            return fast
        return fold(starts, columns, k * self.bucket_s, since, limit)


def choose_resolution(
    span_s: float, points: int, interval_s: float, bucket_s: float, history_s: float
) -> float:
    """The resolution (s) that shows ``span_s`` in about ``points`` rows.

    Finer than a bucket only where the full-resolution history still covers the span.
    """
    raw = span_s / max(points, 1)
    if span_s <= history_s and raw < bucket_s:
        return max(interval_s, raw)
    return bucket_s * max(1, math.ceil(raw / bucket_s - 1e-9))


def fold_contiguous(
    starts: array[float],
    columns: dict[str, tuple[array[float], ...]],
    bucket_s: float,
    k: int,
    since: float | None,
    limit: int | None,
) -> dict[str, Any] | None:
    """``fold`` for buckets without a gap (the usual case), ``None`` otherwise.

    Pads the arrays to whole rows of ``k`` buckets and reduces them with ``map`` over strided
    slices, all in C: a day of 8 GPUs at 90 s rows takes tens of milliseconds.
    """
    n = len(starts)
    if n == 0 or k > n:
        # (Rows wider than the whole history: padding them would allocate k floats per column,
        # 176 million for ``points=1&since=0``; ``fold`` groups the few buckets instead.)
        return None
    first = starts[0]
    for i in range(0, n, max(1, n // 64)):  # a cheap check first, then every bucket
        if abs(starts[i] - (first + i * bucket_s)) > 1e-6:
            return None
    if any(abs(s - (first + i * bucket_s)) > 1e-6 for i, s in enumerate(starts)):
        return None
    res = k * bucket_s
    g0 = math.floor(first / res + 1e-9) * res
    front = round((first - g0) / bucket_s)
    rows = math.ceil((front + n) / k)
    back = rows * k - front - n
    keep = range(rows)
    ts = [g0 + g * res for g in keep]
    if since is not None:
        keep = range(next((g for g in keep if ts[g] + res > since), rows), rows)
    if limit is not None:
        keep = keep[-limit:] if limit > 0 else range(0)
    lo_row, hi_row = (keep.start, keep.stop) if len(keep) else (0, 0)
    series: dict[str, dict[str, list[float | None]]] = {}

    def padded(values: array[float], fill: float) -> array[float]:
        return array("f", [fill]) * front + values + array("f", [fill]) * back

    def reduce(fn: Callable[..., float], values: array[float]) -> list[float]:
        if k == 1:
            return values.tolist()[lo_row:hi_row]
        if hi_row - lo_row < k:  # few wide rows (points=1 over a day): one C pass per row
            return [fn(values[r * k : (r + 1) * k]) for r in range(lo_row, hi_row)]
        parts = [values[j + lo_row * k : hi_row * k : k] for j in range(k)]
        if fn is sum:
            total: list[float] = parts[0].tolist()
            for part in parts[1:]:
                total = list(map(operator.add, total, part))
            return total
        return list(map(fn, *parts))

    for key, (mins, maxs, sums, counts) in columns.items():
        c = reduce(sum, padded(counts, 0.0))
        if not any(c):
            continue
        digits = 0 if key.endswith("_bytes") else 2
        lo = reduce(min, padded(mins, _INF))
        hi = reduce(max, padded(maxs, -_INF))
        total = reduce(sum, padded(sums, 0.0))
        series[key] = {
            "min": [round(v, digits) if n else None for v, n in zip(lo, c, strict=True)],
            "mean": [round(t / n, digits) if n else None for t, n in zip(total, c, strict=True)],
            "max": [round(v, digits) if n else None for v, n in zip(hi, c, strict=True)],
        }
    return {"resolution_s": res, "ts": ts[lo_row:hi_row], "series": series}


def fold(
    starts: Sequence[float],
    columns: Mapping[str, tuple[Sequence[float], ...]],
    resolution_s: float,
    since: float | None,
    limit: int | None,
) -> dict[str, Any]:
    """Merge rows into rows of ``resolution_s``, aligned to its multiples.

    ``starts`` is ascending; each column has its mins, maxs, sums and counts per row. Rows
    whose merged start is before ``since`` are dropped; ``limit`` keeps the newest.
    """
    groups: list[tuple[float, int, int]] = []  # (start, first row, end row)
    for i, start in enumerate(starts):
        if start != start:  # NaN: an unused slot
            continue
        g = math.floor(start / resolution_s + 1e-9) * resolution_s
        if groups and groups[-1][0] == g:
            groups[-1] = (g, groups[-1][1], i + 1)
        else:
            groups.append((g, i, i + 1))
    if since is not None:
        groups = [grp for grp in groups if grp[0] + resolution_s > since]
    if limit is not None:
        groups = groups[-limit:] if limit > 0 else []
    single = all(b - a == 1 for _, a, b in groups)
    series: dict[str, dict[str, list[float | None]]] = {}
    for key, (mins, maxs, sums, counts) in columns.items():
        digits = 0 if key.endswith("_bytes") else 2
        out_min: list[float | None] = []
        out_mean: list[float | None] = []
        out_max: list[float | None] = []
        seen = False
        for _, a, b in groups:
            # min/max/sum over array slices run in C: a day of 8 GPUs folds in about 0.2 s.
            if single:
                n = counts[a]
                lo, hi, total = mins[a], maxs[a], sums[a]
            else:
                n = sum(counts[a:b])
                lo, hi, total = min(mins[a:b]), max(maxs[a:b]), sum(sums[a:b])
            if not n:
                out_min.append(None)
                out_mean.append(None)
                out_max.append(None)
                continue
            seen = True
            out_min.append(round(lo, digits))
            out_mean.append(round(total / n, digits))
            out_max.append(round(hi, digits))
        if seen:
            series[key] = {"min": out_min, "mean": out_mean, "max": out_max}
    return {
        "resolution_s": resolution_s,
        "ts": [g[0] for g in groups],
        "series": series,
    }


def fold_samples(
    samples: Iterable[Sample], resolution_s: float, since: float | None, limit: int | None
) -> dict[str, Any]:
    """The same shape as ``Buckets.query`` from full-resolution samples (for short ranges)."""
    starts: list[float] = []
    columns: dict[str, tuple[list[float], ...]] = {}
    n = 0
    for sample in samples:
        for key, value in sample_values(sample):
            col = columns.get(key)
            if col is None:
                col = columns[key] = ([_INF] * n, [-_INF] * n, [0.0] * n, [0.0] * n)
            if value is None:
                col[0].append(_INF)
                col[1].append(-_INF)
                col[2].append(0.0)
                col[3].append(0.0)
            else:
                v = float(value)
                col[0].append(v)
                col[1].append(v)
                col[2].append(v)
                col[3].append(1.0)
        starts.append(sample.ts)
        n += 1  # noqa: SIM113 (n also sizes the columns that appear later)
        for col in columns.values():  # a column this sample lacked
            if len(col[0]) < n:
                col[0].append(_INF)
                col[1].append(-_INF)
                col[2].append(0.0)
                col[3].append(0.0)
    return fold(starts, columns, resolution_s, since, limit)
