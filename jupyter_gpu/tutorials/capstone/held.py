"""What this process still holds of the GPU's memory after ``empty_cache()``, and why.

Notebook 07 hands the GPU to its script's ranks at the end, and the ranks need nearly all of it.
On one H200 (2026-12-05, sixteenth session) the kernel still reserved 24.01 GiB after
``torch.cuda.empty_cache()``, of which 1.61 GiB were allocated, and the rank beside it ran out
of memory. ``empty_cache()`` frees only the segments that are entirely inactive (torch's
``torch.cuda.memory._snapshot`` docstring says so): a live tensor keeps its whole segment, which
can be far larger than the tensor (the allocator splits a large freed segment for a smaller
request), and a private pool (CUDA graphs) keeps its segments until the pool is released. This
module reads the allocator's snapshot and the live tensors, so that a kernel that keeps memory
says which of the two keeps it, and which tensors.

On one H100 (2026-12-05, seventeenth session), with the models gone, 0.06 GiB of live tensors that
Python does not reach kept 10.04 GiB in 4 segments. torch keeps one cuBLAS and one cuBLASLt
workspace per handle and stream, taken from the caching allocator and held for the process's life
(``aten/src/ATen/cuda/CublasHandlePool.cpp``: ``cublas_handle_stream_to_workspace``; cuBLAS's is
32 MiB on Hopper), and each thread has its own handle (the backward pass runs on autograd's device
thread): workspaces carved out of large freed segments, and so the likeliest keepers. On that
H100 a 32 MiB workspace kept a freed 1 GiB segment until released
(``tests/gpu/test_capstone_gpu.py``); in notebook 07 on an H100 (the eighteenth session),
releasing them before ``empty_cache()`` left the kernel holding 0.00 GiB when the ranks started.
:func:`release_blas_workspaces` lets go of them as torch's own CUDA graph trees do
(``torch._inductor.cudagraph_trees``), and :class:`HeldMemory` names the live blocks that keep
segments, so that a run says whether they were the workspaces' size.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from jupyter_gpu.magics.output.render import fmt_bytes

GiB = 2**30
#: ``segment_pool_id`` of the allocator's own pool; any other id is a private pool (CUDA graphs).
DEFAULT_POOL = (0, 0)


@dataclass(frozen=True)
class SegmentsHeld:
    """What a ``torch.cuda.memory_snapshot()`` says keeps segments from ``empty_cache()``.

    Attributes:
        pinned_bytes: segments of the allocator's own pool that hold a live block:
            ``empty_cache()`` cannot free them, however little of them is in use.
        pinned_segments: how many such segments.
        pool_bytes: segments of private pools (CUDA graphs), kept until the pool is released.
        pinning_blocks: the sizes of the live blocks in the pinned segments, largest first.
    """

    pinned_bytes: int
    pinned_segments: int
    pool_bytes: int
    pinning_blocks: tuple[int, ...] = ()


@dataclass(frozen=True)
class HeldMemory:
    """What the caching allocator still reserves, split by what keeps it.

    Attributes:
        reserved_bytes: every segment the allocator holds.
        allocated_bytes: the live blocks in them.
        segments: what keeps segments from ``empty_cache()`` (:func:`segments_held`).
        largest_tensors: the largest live CUDA tensors Python can reach, described, with bytes.
    """

    reserved_bytes: int
    allocated_bytes: int
    segments: SegmentsHeld
    largest_tensors: tuple[tuple[str, int], ...] = ()

    def describe(self) -> str:
        """One sentence: how much is kept, and by what."""
        held = self.segments
        text = (
            f"{self.reserved_bytes / GiB:.2f} GiB reserved, {self.allocated_bytes / GiB:.2f} GiB "
            f"of it in live tensors; {held.pinned_bytes / GiB:.2f} GiB in {held.pinned_segments} "
            f"segment(s) that a live tensor keeps, {held.pool_bytes / GiB:.2f} GiB in private "
            "pools (CUDA graphs)"
        )
        if held.pinning_blocks:
            text += f", kept by live blocks of {describe_sizes(held.pinning_blocks)}"
        if self.largest_tensors:
            largest = ", ".join(
                f"{name} {size / GiB:.2f} GiB" for name, size in self.largest_tensors
            )
            text += f"; the largest tensors Python reaches: {largest}"
        elif self.allocated_bytes:
            text += (
                "; Python reaches none of the live tensors (an autograd graph or C++ keeps them)"
            )
        return text


def weights_alive() -> Counter[str]:
    """The modules this process still holds that own weights, by class, after a collection.

    A notebook lets go of a model by rebinding every name that reaches it. One it forgot keeps
    the weights on the GPU: a loop variable kept 07's final GPT on one H100 (2026-12-05), and
    its FP8 swap (``Float8Swap``, a global) keeps every block's ``nn.Linear`` after the GPT is
    gone, 1.51 GiB of fp32 weights at the final shape: most likely the 1.61 GiB of live tensors
    the H200's kernel still held that day, which a count of the GPTs alone did not see. Counting
    the modules that own parameters, whatever holds them, does not depend on remembering names.
    """
    gc.collect()
    # type(), not isinstance(): isinstance reads __class__, which some objects torch keeps
    # (torch.distributed.reduce_op) answer with a deprecation warning.
    return Counter(
        type(obj).__name__
        for obj in gc.get_objects()
        if issubclass(type(obj), nn.Module)
        and next(obj.parameters(recurse=False), None) is not None
    )


def describe_weights(alive: Counter[str]) -> str:
    """``32 Linear, 16 RMSNorm`` (most first), or ``no module with weights``."""
    return ", ".join(f"{count} {name}" for name, count in alive.most_common()) or (
        "no module with weights"
    )


def describe_sizes(sizes: Iterable[int]) -> str:
    """``2 x 32.0 MiB, 4 x 512 B``: block sizes grouped, largest first, each in its own unit."""
    counts = Counter(sizes)
    largest_first = sorted(counts, reverse=True)
    return ", ".join(f"{counts[size]} x {fmt_bytes(size)}" for size in largest_first)


def segments_held(segments: Iterable[Mapping[str, Any]]) -> SegmentsHeld:
    """The pinned segments and private pools of a snapshot, and the live blocks that pin."""
    pinned_bytes = pinned_segments = pool_bytes = 0
    pinning: list[int] = []
    for segment in segments:
        size = int(segment["total_size"])
        if tuple(segment.get("segment_pool_id", DEFAULT_POOL)) != DEFAULT_POOL:
            pool_bytes += size
        elif int(segment["active_size"]) > 0:
            pinned_bytes += size
            pinned_segments += 1
            pinning += [
                int(block["size"])
                for block in segment.get("blocks", ())
                if str(block.get("state", "")).startswith("active")
            ]
    return SegmentsHeld(pinned_bytes, pinned_segments, pool_bytes, tuple(sorted(pinning)[::-1]))


def release_blas_workspaces() -> bool:
    """Let go of the cuBLAS and cuBLASLt workspaces torch keeps; False where this torch cannot.

    torch makes a new one at the next matrix multiply on each handle and stream, from memory that
    is free then; letting go of them is what torch's CUDA graph trees do before a capture
    (``torch._inductor.cudagraph_trees``). ``torch._C._cuda_clearCublasWorkspaces`` is private and
    only in CUDA builds, hence the check.
    """
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is None or not torch.cuda.is_available():
        return False
    torch.cuda.synchronize()  # no kernel still using a workspace
    clear()
    return True


def largest_cuda_tensors(count: int = 3) -> tuple[tuple[str, int], ...]:
    """The ``count`` largest CUDA tensors the garbage collector tracks, by their storage's bytes.

    Only tensors with a Python object are seen: what an autograd graph saved, or C++ keeps, is not.
    """
    sizes: dict[int, tuple[str, int]] = {}  # one entry per storage: views share theirs
    for obj in gc.get_objects():
        # type(), not isinstance(): isinstance reads __class__, which some objects torch keeps
        # answer with a deprecation warning (see weights_alive).
        if not issubclass(type(obj), torch.Tensor) or not obj.is_cuda:
            continue
        try:
            storage = obj.untyped_storage()
        except (RuntimeError, NotImplementedError):  # a tensor subclass without one storage
            continue
        if storage.device.type != "cuda":  # a FakeTensor says cuda; its storage is on meta
            continue
        name = f"{type(obj).__name__}{tuple(obj.shape)} {str(obj.dtype).removeprefix('torch.')}"
        sizes.setdefault(storage.data_ptr(), (name, storage.nbytes()))
    return tuple(sorted(sizes.values(), key=lambda item: -item[1])[:count])


def held_memory() -> HeldMemory | None:
    """What the allocator of the current device still reserves, and what keeps it; None on a CPU."""
    if not torch.cuda.is_available():
        return None
    device = torch.cuda.current_device()
    snapshot = torch.cuda.memory_snapshot()  # type: ignore[no-untyped-call]  # torch leaves it untyped
    return HeldMemory(
        reserved_bytes=int(torch.cuda.memory_reserved()),
        allocated_bytes=int(torch.cuda.memory_allocated()),
        segments=segments_held(s for s in snapshot if s.get("device", device) == device),
        largest_tensors=largest_cuda_tensors(),
    )
