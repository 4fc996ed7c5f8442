"""Notebook 03's helpers: the OOM message read, a CPU peak measured, the allocator option set."""

from __future__ import annotations

import pytest
import torch

from jupyter_gpu.tutorials.fragmentation import (
    FragmentationReading,
    GrowthReading,
    alloc_conf,
    allocator_env,
    fresh_reading,
    hole_stats,
)
from jupyter_gpu.tutorials.memory import measured_peak, oom_verdict, read_oom_message
from jupyter_gpu.tutorials.timing import time_interleaved
from tests.helpers import recording_variants

# torch 2.11's wording under a per-process cap (a real message, the numbers from notebook 03).
CAPPED = (
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.81 GiB "
    "of which 120.46 GiB is free. Including non-PyTorch memory, this process has 19.34 GiB "
    "memory in use. 11.08 GiB allowed; Of the allocated memory 10.41 GiB is allocated by "
    "PyTorch, and 150.00 MiB is reserved by PyTorch but unallocated. If reserved but "
    "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    "to avoid fragmentation.  See documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)
# torch 2.1's wording (its typo "capacty" and the older hint).
OLD = (
    "CUDA out of memory. Tried to allocate 44.00 MiB. GPU 0 has a total capacty of 2.00 GiB of "
    "which 0 bytes is free. Of the allocated memory 10.85 GiB is allocated by PyTorch, and "
    "213.71 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is "
    "large try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory "
    "Management and PYTORCH_CUDA_ALLOC_CONF"
)


def test_the_oom_message_is_read_part_by_part() -> None:
    parts = read_oom_message(CAPPED)
    assert parts.tried == "2.00 GiB"
    assert (parts.capacity, parts.free, parts.allowed) == ("139.81 GiB", "120.46 GiB", "11.08 GiB")
    assert (parts.by_pytorch, parts.reserved_unallocated) == ("10.41 GiB", "150.00 MiB")
    assert parts.hint == "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
    assert parts.bytes_of("reserved_unallocated") == 150 * 2**20
    assert parts.bytes_of("tried") == 2 * 2**30
    old = read_oom_message(OLD)
    assert (old.capacity, old.free, old.allowed) == ("2.00 GiB", "0 bytes", None)
    assert old.hint == "max_split_size_mb"
    assert old.bytes_of("free") == 0
    assert old.bytes_of("allowed") is None


GiB, MiB = 2**30, 2**20


def test_the_oom_verdict_follows_the_cap_against_the_steps_need() -> None:
    # Notebook 03 on the H200: a cap set below the step's need on purpose, and a message whose
    # cache (317 MiB) was larger than the failed request (108 MiB). The old verdict compared
    # only those two and said "fragmentation may be what failed it".
    need, cap = int(2.73 * GiB + 11.91 * GiB), int(11.79 * GiB)
    verdict = oom_verdict(need, cap, tried_bytes=108 * MiB, cached_bytes=317 * MiB)
    assert verdict.cause == "cap"
    assert "2.85 GiB short" in verdict.sentence
    assert "could not have covered that" in verdict.sentence
    assert "fragmentation" not in verdict.sentence.replace("fragmented or not", "")
    just_over = oom_verdict(cap + 100 * MiB, cap, tried_bytes=108 * MiB, cached_bytes=317 * MiB)
    assert just_over.cause == "cap"
    assert "beside the point" in just_over.sentence
    assert oom_verdict(need, cap, None, None).cause == "cap"


def test_the_oom_verdict_names_fragmentation_only_when_the_step_fits_the_cap() -> None:
    fits = oom_verdict(10 * GiB, 11 * GiB, tried_bytes=108 * MiB, cached_bytes=317 * MiB)
    assert fits.cause == "fragmentation"
    assert "not in one piece" in fits.sentence
    other = oom_verdict(10 * GiB, 11 * GiB, tried_bytes=2 * GiB, cached_bytes=150 * MiB)
    assert other.cause == "unexplained"
    assert "smaller than the request" in other.sentence


def test_a_cpu_peak_is_measured_from_the_allocators_records() -> None:
    """Half the micro-batch, half the activations at once: the peak halves."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(4)])
    x = torch.randn(512, 256)

    def step(micro: int) -> None:
        for part in x.split(micro):
            net(part).square().mean().backward()

    whole = measured_peak(lambda: step(512), "cpu")
    halves = measured_peak(lambda: step(256), "cpu")
    assert "profile_memory" in whole.source
    assert whole.bytes >= 4 * 512 * 256 * 4, "four activations of 512 x 256 floats at least"
    assert halves.bytes == pytest.approx(whole.bytes / 2, rel=0.25)


@pytest.mark.parametrize(
    ("existing", "on", "expected"),
    [
        (None, True, "expandable_segments:True"),
        ("", False, "expandable_segments:False"),
        ("expandable_segments:True", False, "expandable_segments:False"),
        (
            "per_process_memory_fraction:0.5,expandable_segments:False",
            True,
            "per_process_memory_fraction:0.5,expandable_segments:True",
        ),
    ],
)
def test_the_fresh_process_keeps_the_other_allocator_options(
    existing: str | None, on: bool, expected: str
) -> None:
    assert alloc_conf(existing, on) == expected


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
        (
            {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"},
            {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64,expandable_segments:True"},
        ),
        # A kernel that sets the neutral name: a torch that reads it first would ignore the CUDA
        # name, so the child gets both, saying the same thing.
        (
            {"PYTORCH_ALLOC_CONF": "max_split_size_mb:64"},
            {
                "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64,expandable_segments:True",
                "PYTORCH_ALLOC_CONF": "max_split_size_mb:64,expandable_segments:True",
            },
        ),
        (
            {"PYTORCH_ALLOC_CONF": "expandable_segments:False", "PYTORCH_CUDA_ALLOC_CONF": "x:1"},
            {
                "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                "PYTORCH_ALLOC_CONF": "expandable_segments:True",
            },
        ),
    ],
)
def test_a_child_reads_the_same_allocator_options_under_either_name(
    environ: dict[str, str], expected: dict[str, str]
) -> None:
    assert allocator_env(environ, expandable=True) == expected


def test_interleaved_timing_alternates_the_order_round_by_round() -> None:
    order, variants = recording_variants("a", "b")
    timings = time_interleaved(variants, rounds=4, runs=2, warmup=1, device="cpu")
    # One warm-up call each, then a block of 2 calls per variant and round, A B then B A.
    assert order == ["a", "b"] + ["a", "a", "b", "b", "b", "b", "a", "a"] * 2
    assert timings["a"].runs == timings["b"].runs == timings.rounds == 4
    assert timings["a"].calls_per_run == 2
    assert timings.ratio("b").rounds == 4
    with pytest.raises(ValueError, match="rounds"):
        time_interleaved({"a": lambda: None}, rounds=0, runs=1, warmup=0, device="cpu")


def test_gpu_busy_counts_overlapping_kernels_once() -> None:
    from jupyter_gpu.measure import union_length
    from jupyter_gpu.tutorials.timing import gpu_busy_per_call

    assert union_length([(5.0, 6.0), (0.0, 2.0), (1.0, 3.0), (1.5, 2.5)]) == 4.0
    assert union_length([]) == 0.0
    if not torch.cuda.is_available():
        assert gpu_busy_per_call(lambda: None) is None


def _block(size_mib: int, state: str) -> dict[str, object]:
    return {"size": size_mib * MiB, "state": state}


def test_holes_are_free_blocks_beside_live_ones_in_the_patterns_segments() -> None:
    live, free = "active_allocated", "inactive"
    snapshot = [
        {"address": 1, "blocks": [_block(6, free), _block(6, live)]},  # the model's: skipped
        {
            "address": 2,
            "blocks": [_block(6, live), _block(6, free), _block(6, live), _block(2, free)],
        },
        {"address": 3, "blocks": [_block(12, free), _block(6, live), _block(2, free)]},
        {"address": 4, "blocks": [_block(20, free)]},  # wholly free: empty_cache() can release it
    ]
    stats = hole_stats(snapshot, skip_addresses={1})
    assert (stats.holes, stats.largest_hole_bytes, stats.segments) == (4, 12 * MiB, 3)


def test_the_fresh_process_line_reads_back_both_patterns() -> None:
    line = (
        '{"holes": {"allocated_bytes": 10, "reserved_bytes": 30, "inactive_split_bytes": 20, '
        '"expandable": true, "holes": 3, "largest_hole_bytes": 6, "segments": 1}, '
        '"growth": {"steps": 8, "largest_bytes": 512, "peak_reserved_bytes": 2304}}'
    )
    reading = fresh_reading(line)
    assert reading.holes == FragmentationReading(10, 30, 20, True, 3, 6, 1)
    assert reading.holes.unusable_bytes == 20
    assert reading.growth == GrowthReading(8, 512, 2304)
    assert reading.growth.unusable_bytes == 2304 - 512
