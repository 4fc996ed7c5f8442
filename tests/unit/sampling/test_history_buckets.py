"""The long history's buckets: min/mean/max per bucket, bounded memory, folding, seeding."""

from __future__ import annotations

import math
import sys
import tracemalloc
from dataclasses import replace

import pytest

from jupyter_gpu.readings import DeviceSample, HostSample, Sample, catalog
from jupyter_gpu.readings.records import CompileCacheSample
from jupyter_gpu.sampling import Sampler, SamplerOptions
from jupyter_gpu.sampling.buckets import (
    HOST_COLUMNS,
    Buckets,
    choose_resolution,
    fold_samples,
)

HOST = HostSample(cpu_pct=10.0, cpu_count=2.0, mem_used_bytes=2**30, mem_total_bytes=2**33)


def sample(ts: float, util: float, *, gpus: int = 1, state: str = "ok") -> Sample:
    devices = tuple(
        DeviceSample(
            index=i,
            uuid=None,
            name=None,
            state=state,  # type: ignore[arg-type] (a literal in the tests)
            util_pct=util if state == "ok" else None,
            mem_used_bytes=1_000_000_000 + i if state == "ok" else None,
            power_w=100.0,
            temperature_c=40.0,
        )
        for i in range(gpus)
    )
    return Sample(1, ts, "simulated", True, None, devices, HOST)


def test_a_bucket_keeps_min_mean_and_max() -> None:
    b = Buckets(bucket_s=10, span_s=100)
    for ts, util in ((100.0, 10.0), (103.0, 50.0), (109.9, 30.0), (110.0, 70.0)):
        b.add(sample(ts, util))
    out = b.query()
    assert out["ts"] == [100.0, 110.0]
    util = out["series"]["gpu.0.util_pct"]
    assert util == {"min": [10.0, 70.0], "mean": [30.0, 70.0], "max": [50.0, 70.0]}
    assert out["series"]["gpu.0.mem_used_bytes"]["max"][0] == 1_000_000_000
    # Columns with no reading at all (the GPM ones here, the unscanned cache) are left out.
    assert "gpu.0.sm_active_pct" not in out["series"]
    assert "cache.size_bytes" not in out["series"]


def test_an_unscanned_cache_is_not_zero_but_a_scanned_one_counts() -> None:
    b = Buckets(bucket_s=10, span_s=100)
    scanned = CompileCacheSample(size_bytes=5, file_count=1, scanned_ts=1.0)
    b.add(replace(sample(100.0, 1.0), compile_cache=scanned))
    assert b.query()["series"]["cache.size_bytes"]["mean"] == [5.0]


def test_a_lost_gpu_leaves_a_gap() -> None:
    b = Buckets(bucket_s=10, span_s=100)
    b.add(sample(100.0, 10.0))
    b.add(sample(110.0, 0.0, state="lost"))
    assert b.query()["series"]["gpu.0.util_pct"]["mean"] == [10.0, None]


def test_the_ring_drops_the_oldest_buckets_and_memory_stays_fixed() -> None:
    b = Buckets(bucket_s=1, span_s=5)
    b.add(sample(0.0, 0.0))
    fixed = b.memory_bytes()
    for t in range(1, 20):
        b.add(sample(float(t), float(t)))
    out = b.query()
    assert out["ts"] == [14.0, 15.0, 16.0, 17.0, 18.0, 19.0]  # 5 closed + the open one
    assert out["series"]["gpu.0.util_pct"]["mean"] == [14.0, 15.0, 16.0, 17.0, 18.0, 19.0]
    assert b.memory_bytes() == fixed


def test_folding_merges_aligned_buckets_and_honours_since_and_limit() -> None:
    b = Buckets(bucket_s=10, span_s=1000)
    for t in range(0, 100, 5):
        b.add(sample(float(t), float(t)))
    out = b.query(resolution_s=30)
    assert out["resolution_s"] == 30
    assert out["ts"] == [0.0, 30.0, 60.0, 90.0]
    util = out["series"]["gpu.0.util_pct"]
    assert util["min"] == [0.0, 30.0, 60.0, 90.0]
    assert util["max"] == [25.0, 55.0, 85.0, 95.0]
    assert util["mean"] == [12.5, 42.5, 72.5, 92.5]
    assert b.query(resolution_s=30, since=65)["ts"] == [60.0, 90.0]
    assert b.query(resolution_s=30, limit=1)["ts"] == [90.0]
    # A resolution between buckets rounds up to whole buckets.
    assert b.query(resolution_s=11)["resolution_s"] == 20


def test_choose_resolution() -> None:
    # A short range inside the full-resolution history: finer than a bucket.
    assert choose_resolution(300, 1000, 1.0, 10.0, 600) == 1.0
    assert choose_resolution(600, 100, 1.0, 10.0, 600) == 6.0
    # Longer than the full-resolution history: whole buckets.
    assert choose_resolution(3600, 1000, 1.0, 10.0, 600) == 10.0
    assert choose_resolution(86_400, 1000, 1.0, 10.0, 600) == 90.0


def test_a_column_is_made_when_its_reading_first_has_a_value_in_its_place() -> None:
    b = Buckets(bucket_s=10, span_s=100)
    b.add(sample(100.0, 10.0))  # no GPM reading yet (its first window has not ended)
    assert "gpu.0.sm_active_pct" not in b.columns
    (device,) = sample(101.0, 20.0).devices
    b.add(replace(sample(101.0, 20.0), devices=(replace(device, sm_active_pct=70.0),)))
    assert b.columns == [
        "host.cpu_pct",
        "host.mem_used_bytes",  # no cache.size_bytes: no cache was scanned
        "gpu.0.util_pct",
        "gpu.0.mem_used_bytes",
        "gpu.0.power_w",
        "gpu.0.temperature_c",
        "gpu.0.sm_active_pct",  # in the catalog's order, not last
    ]
    assert b.query()["series"]["gpu.0.sm_active_pct"]["mean"] == [70.0]


def test_fold_samples_has_the_same_shape() -> None:
    out = fold_samples((sample(float(t), float(t)) for t in range(10)), 5.0, None, None)
    assert out["ts"] == [0.0, 5.0]
    assert out["series"]["gpu.0.util_pct"]["mean"] == [2.0, 7.0]


def charted_by_default() -> list[str]:
    """The long history's readings of the groups a server reads by default."""
    made = catalog.layout()
    default = SamplerOptions()
    on = {g.name for g in made.groups if g.enabled_by is None or getattr(default, g.enabled_by)}
    return [m.field for m in made.metrics if m.long_history and m.group in on]


@pytest.mark.slow
def test_memory_bound_at_8_gpus_over_24_hours() -> None:
    """24 h of 10 s buckets at 8 GPUs, the readings charted by default: 9.3 MB, at any uptime.

    The figures in docs/api.md and in buckets.py's docstring come from here.
    """
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        b = Buckets(bucket_s=10, span_s=86_400)
        full = sample(0.0, 50.0, gpus=8)
        full = replace(
            full,
            devices=tuple(
                replace(d, **{f: 1.0 for f in charted_by_default() if f != "util_pct"})
                for d in full.devices
            ),
            compile_cache=CompileCacheSample(size_bytes=1, file_count=1, scanned_ts=1.0),
        )
        b.add(full)
        allocated_at_start = tracemalloc.get_traced_memory()[0] - before
        # A day and a bit of buckets wraps the ring: nothing grows.
        for i in range(1, b.slots + 200):
            b.add(replace(full, ts=i * 10.0))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    columns = len(HOST_COLUMNS) + 8 * len(charted_by_default())
    assert len(b.columns) == columns  # none for a reading that has no value (a group off)
    assert b.memory_bytes() == columns * 4 * 4 * 8640 + 8 * 8640
    assert 4 * 4 * 8640 == 138_240  # bytes per reading and GPU over 24 h
    assert b.memory_bytes() < 9_400_000
    assert held < b.memory_bytes() * 1.05 + 200_000, (held, b.memory_bytes())
    assert held - allocated_at_start < 100_000  # running a day allocated nothing lasting
    print(f"24 h at 8 GPUs: {b.memory_bytes() / 1e6:.2f} MB held", file=sys.stderr)


def test_a_day_of_8_gpus_folds_to_1000_points_fast_enough() -> None:
    import time

    b = Buckets(bucket_s=10, span_s=86_400)
    for i in range(0, 86_400, 10):
        b.add(sample(float(i), float(i % 100), gpus=8))
    started = time.perf_counter()
    out = b.query(resolution_s=choose_resolution(86_400, 1000, 1.0, 10.0, 600))
    took = time.perf_counter() - started
    assert len(out["ts"]) == 960
    assert math.isclose(out["series"]["gpu.7.util_pct"]["max"][0], 80.0)
    assert took < 2.0  # measured about 0.2 s on one core of the CI machine


@pytest.mark.timeout(60)
def test_the_simulated_backend_seeds_a_long_past() -> None:
    sampler = Sampler(
        SamplerOptions(
            backend="simulated",
            simulated_devices=2,
            history_s=60,
            simulated_seed_history_s=3600,
            cache_scan_interval_s=3600,
        ),
        encode=lambda s: "{}",
    )
    sampler.start()
    try:
        assert sampler.ready.wait(30)
    finally:
        sampler.stop()
    out = sampler.buckets.query()
    span = out["ts"][-1] - out["ts"][0]
    assert 3500 <= span <= 3700
    assert len(sampler.history) >= 59  # the last history_s at full resolution
    seqs = [e.sample.seq for e in sampler.history.since()]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    # The seeded past has the GPM activity the live samples have, from its first bucket on.
    sm_active = out["series"]["gpu.0.sm_active_pct"]["mean"]
    assert sm_active[0] is not None
    assert sum(v is not None for v in sm_active) >= 0.9 * len(sm_active)
    assert sampler.history.since()[0].sample.devices[0].sm_active_pct is not None


@pytest.mark.parametrize(
    ("resolution", "since", "limit"), [(10, None, None), (30, 95, 2), (90, None, 1)]
)
def test_the_fast_fold_agrees_with_the_plain_one(
    resolution: float, since: float | None, limit: int | None
) -> None:
    from jupyter_gpu.sampling.buckets import fold, fold_contiguous

    b = Buckets(bucket_s=10, span_s=1000)
    for t in range(3, 400, 4):
        b.add(sample(float(t), float(t % 37), state="ok" if t % 50 else "lost"))
    starts, columns = b.snapshot()
    k = round(resolution / 10)
    fast = fold_contiguous(starts, columns, 10.0, k, since, limit)
    assert fast is not None
    assert fast == fold(starts, columns, resolution, since, limit)


def test_a_row_wider_than_the_history_folds_the_buckets_it_has() -> None:
    # ``history?points=1&since=0``: one row as wide as 1970 to now. Padding the buckets to whole
    # rows would allocate a float per bucket of that row (176 million per column, seconds of
    # CPU, found by the API fuzz test); a resolution of 1e12 s would not fit in memory at all.
    b = Buckets(bucket_s=10, span_s=1000)
    for i in range(50):
        b.add(sample(1_000_000.0 + 10 * i, float(i)))
    for resolution in (2e9, 1e12):
        out = b.query(since=0, resolution_s=resolution)
        assert out["ts"] == [0.0]
        assert out["series"]["gpu.0.util_pct"] == {"min": [0.0], "mean": [24.5], "max": [49.0]}
