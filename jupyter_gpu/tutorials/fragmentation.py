"""Notebook 03's fragmentation patterns, here or in a fresh process with another allocator setting.

:func:`fragment` allocates many 6 MiB tensors, frees every other one, asks for one tensor as large
as all the freed ones together, and calls ``torch.cuda.empty_cache()``. With torch's default
allocator the 6 MiB pieces share 20 MiB segments, so the freed pieces are holes in segments that
still hold a live piece: *reserved* but unusable for the large request, and ``empty_cache()``
cannot give them back. :func:`grow` is the other pattern: one tensor that grows step by step (a
batch that gets longer), the old one freed before the next is made; the default allocator cannot
serve a larger request from a smaller cached block, so each step takes a new segment.

``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` changes how the allocator maps memory, and
is read once, when CUDA starts in a process: a notebook's kernel cannot switch it for itself.
:func:`in_fresh_process` runs both patterns in a new Python process with the setting on or off
(``python -m jupyter_gpu.tutorials.fragmentation`` is that process) and returns its readings.

What the setting can and cannot give back is in torch's allocator
(``c10/cuda/CUDACachingAllocator.cpp``): an expandable segment maps physical memory in units of
``kLargeBuffer`` (20 MiB) for allocations above 1 MiB (``get_expandable_segment``:
``pool->is_small ? kSmallBuffer : kLargeBuffer``), and ``empty_cache()`` unmaps "all the
completely empty segment_size_ segments" (``ExpandableSegment::unmap``): a free 6 MiB piece in a
unit that still holds a live piece stays mapped. A growing tensor, on the other hand, extends the
segment's free end instead of taking a new segment.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

ALLOC_CONF_ENV = "PYTORCH_CUDA_ALLOC_CONF"
NEW_ALLOC_CONF_ENV = "PYTORCH_ALLOC_CONF"  # the device-neutral name newer torch also reads
PIECE_BYTES = 6 * 2**20
MAPPING_UNIT_BYTES = 20 * 2**20  # kLargeBuffer: an expandable segment's unit for large blocks
GROWTH_STEPS = 8
GROWTH_BASE_BYTES = 64 * 2**20  # the tensor grows 64, 128, ... 512 MiB


@dataclass(frozen=True)
class FragmentationReading:
    """The allocator after the pattern, above what it held before it, in bytes.

    Attributes:
        allocated_bytes: in live tensors (the kept pieces and the large tensor).
        reserved_bytes: what the allocator holds from CUDA.
        inactive_split_bytes: free pieces inside segments that also hold live ones.
        expandable: whether the allocator's segments were expandable (``None``: this torch's
            snapshot does not say).
        holes: free blocks left in the segments the pattern made that also hold a live block.
        largest_hole_bytes: the largest of them.
        segments: segments the pattern added.
    """

    allocated_bytes: int
    reserved_bytes: int
    inactive_split_bytes: int
    expandable: bool | None
    holes: int = 0
    largest_hole_bytes: int = 0
    segments: int = 0

    @property
    def unusable_bytes(self) -> int:
        """Reserved but not allocated, after ``empty_cache()``: the waste."""
        return self.reserved_bytes - self.allocated_bytes


@dataclass(frozen=True)
class HoleStats:
    """Free blocks in segments that also hold live ones, from ``torch.cuda.memory_snapshot()``."""

    holes: int
    largest_hole_bytes: int
    segments: int


def hole_stats(snapshot: list[dict[str, Any]], skip_addresses: set[int]) -> HoleStats:
    """Count the holes in the snapshot's segments, leaving out those at ``skip_addresses``.

    A segment is a dict with ``address`` and ``blocks`` (each with ``size`` and ``state``:
    ``active_allocated``, ``active_pending_free`` or ``inactive``), as torch writes it. A hole is
    an inactive block in a segment that has an active one: the allocator cannot release it.
    """
    holes = largest = segments = 0
    for segment in snapshot:
        if segment.get("address") in skip_addresses:
            continue
        segments += 1
        blocks = segment.get("blocks", [])
        if not any(str(b.get("state", "")).startswith("active") for b in blocks):
            continue
        for block in blocks:
            if block.get("state") == "inactive":
                holes += 1
                largest = max(largest, int(block.get("size", 0)))
    return HoleStats(holes, largest, segments)


@dataclass(frozen=True)
class GrowthReading:
    """A tensor grown step by step: the most the allocator reserved against what was live.

    Attributes:
        steps: how many sizes it took.
        largest_bytes: the last (largest) size, the most live at once (the old one is freed
            before the next is made).
        peak_reserved_bytes: ``torch.cuda.max_memory_reserved()`` over the pattern, above what
            was reserved before it.
    """

    steps: int
    largest_bytes: int
    peak_reserved_bytes: int

    @property
    def unusable_bytes(self) -> int:
        """Reserved at the peak beyond the largest tensor: segments no later step could use."""
        return self.peak_reserved_bytes - self.largest_bytes


@dataclass(frozen=True)
class FreshReading:
    """Both patterns' readings from one fresh process."""

    holes: FragmentationReading
    growth: GrowthReading


def grow(steps: int = GROWTH_STEPS, base_bytes: int = GROWTH_BASE_BYTES) -> GrowthReading:
    """Make a tensor of ``base_bytes``, then 2x, 3x... ``steps`` x, freeing each before the next.

    Resets the allocator's peak counters; empties the cache before and after.
    """
    import torch

    gc.collect()
    torch.cuda.empty_cache()
    reserved = torch.cuda.memory_reserved()
    torch.cuda.reset_peak_memory_stats()
    held = None
    for k in range(1, steps + 1):
        del held  # freed first: the next, larger request could reuse its memory
        held = torch.empty(k * base_bytes, dtype=torch.uint8, device="cuda")
    peak = torch.cuda.max_memory_reserved() - reserved
    del held
    torch.cuda.empty_cache()
    return GrowthReading(steps, steps * base_bytes, peak)


def fragment(pieces: int) -> tuple[FragmentationReading, list[Any]]:
    """Run the pattern on the current CUDA device; returns the reading and the live tensors.

    The caller holds the tensors as long as it wants to look at the allocator (``%memsummary``),
    then drops them.
    """
    import torch

    gc.collect()
    torch.cuda.empty_cache()
    allocated, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    existing = {s["address"] for s in torch.cuda.memory_snapshot()}  # type: ignore[no-untyped-call]
    kept = [torch.empty(PIECE_BYTES, dtype=torch.uint8, device="cuda") for _ in range(pieces)]
    del kept[::2]  # free every other piece: a hole beside a live piece in every segment
    big = torch.empty(len(kept) * PIECE_BYTES, dtype=torch.uint8, device="cuda")  # as much
    torch.cuda.empty_cache()
    segments = torch.cuda.memory_snapshot()  # type: ignore[no-untyped-call]
    flags = [s["is_expandable"] for s in segments if "is_expandable" in s]
    stats = hole_stats(segments, existing)
    reading = FragmentationReading(
        allocated_bytes=torch.cuda.memory_allocated() - allocated,
        reserved_bytes=torch.cuda.memory_reserved() - reserved,
        inactive_split_bytes=int(
            torch.cuda.memory_stats().get("inactive_split_bytes.all.current", 0)
        ),
        expandable=any(flags) if flags else None,
        holes=stats.holes,
        largest_hole_bytes=stats.largest_hole_bytes,
        segments=stats.segments,
    )
    return reading, [*kept, big]


def alloc_conf(existing: str | None, expandable: bool) -> str:
    """``existing`` allocator options with ``expandable_segments`` set to ``expandable``."""
    options = [o for o in (existing or "").split(",") if o.strip()]
    kept = [o for o in options if o.split(":", 1)[0].strip() != "expandable_segments"]
    return ",".join([*kept, f"expandable_segments:{expandable}"])


def allocator_env(environ: Mapping[str, str], expandable: bool) -> dict[str, str]:
    """The allocator variables for a child of ``environ`` with ``expandable_segments`` set.

    torch reads its allocator options from ``PYTORCH_CUDA_ALLOC_CONF`` or the device-neutral
    ``PYTORCH_ALLOC_CONF``, and its versions differ in which one wins when both are set (c10's
    ``AllocatorConfig.cpp`` has read them in either order). So the child gets the options under
    the CUDA name, and under the neutral name too where ``environ`` sets it (a child inherits it
    and, in a torch that reads it first, would ignore the other): both names then say the same
    thing. The options kept are the neutral name's where both are set, else the one set.
    """
    existing = environ.get(NEW_ALLOC_CONF_ENV) or environ.get(ALLOC_CONF_ENV)
    value = alloc_conf(existing, expandable)
    names = [ALLOC_CONF_ENV, *([NEW_ALLOC_CONF_ENV] if NEW_ALLOC_CONF_ENV in environ else [])]
    return dict.fromkeys(names, value)


def in_fresh_process(
    expandable: bool, pieces: int, fraction: float | None = None, timeout_s: float = 300
) -> FreshReading:
    """Both patterns in a new Python process whose allocator has ``expandable_segments`` on/off.

    The child keeps this process's other allocator options and, with ``fraction``, runs under
    the same ``set_per_process_memory_fraction`` cap.

    Raises:
        RuntimeError: the child failed (its last lines of output are the message).
    """
    env = {**os.environ, **allocator_env(os.environ, expandable)}
    command = [sys.executable, "-m", __name__, "--pieces", str(pieces)]
    if fraction is not None:
        command += ["--fraction", repr(fraction)]
    done = subprocess.run(  # noqa: S603  # this interpreter running this module
        command, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
        raise RuntimeError(f"the fresh process failed ({done.returncode}): {tail}")
    return fresh_reading(lines[-1])


def fresh_reading(line: str) -> FreshReading:
    """The child's JSON line (``{"holes": {...}, "growth": {...}}``) as a :class:`FreshReading`."""
    found = json.loads(line)
    return FreshReading(FragmentationReading(**found["holes"]), GrowthReading(**found["growth"]))


def main(argv: list[str] | None = None) -> None:
    """Run both patterns in this (fresh) process and print their readings as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pieces", type=int, default=300)
    parser.add_argument("--fraction", type=float, help="torch's per-process memory cap")
    args = parser.parse_args(argv)
    import torch

    if args.fraction is not None:
        torch.cuda.set_per_process_memory_fraction(args.fraction)
    reading, held = fragment(args.pieces)
    del held
    growth = grow()
    print(json.dumps({"holes": asdict(reading), "growth": asdict(growth)}))  # noqa: T201  # the parent reads this line


if __name__ == "__main__":
    main()
