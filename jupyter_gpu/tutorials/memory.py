"""Memory measurements for notebook 03: what autograd saves, and the allocator's peaks.

:func:`saved_tensor_bytes` works on any device: it counts the bytes of the tensors autograd
keeps for the backward pass (the activations), through ``saved_tensors_hooks``. The other
helpers read torch's CUDA caching allocator and return ``None`` without CUDA.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch


def tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Total bytes of ``tensors`` (elements x element size)."""
    return sum(t.numel() * t.element_size() for t in tensors)


def saved_tensor_bytes(forward: Callable[[], object]) -> int:
    """Bytes of the tensors autograd saves for backward while ``forward()`` runs.

    Each storage is counted once (a weight saved by several operations, or a view of a saved
    tensor, is not counted twice). Parameters are left out: they are alive anyway.

    The forward's graph is never run backward: the pack hook stores a placeholder instead of
    the tensor, and the function drops the forward's result and its own references before
    returning, so nothing it measured stays allocated. (A hook that stores the tensor itself
    makes a reference cycle whenever an operation saves its own output: the output holds its
    ``grad_fn``, which holds the output. Python's collector cannot see through autograd's C++
    graph, so that memory would stay allocated with no name holding it.)
    """
    seen: set[tuple[int, int]] = set()
    alive: list[torch.Tensor] = []  # held until the forward ends: no address is reused meanwhile
    total = 0

    def pack(t: torch.Tensor) -> int:
        nonlocal total
        if not isinstance(t, torch.nn.Parameter):
            storage = t.untyped_storage()
            key = (storage.data_ptr(), storage.nbytes())
            if key not in seen:
                seen.add(key)
                total += storage.nbytes()
                alive.append(t)
        return 0

    def unpack(_: int) -> torch.Tensor:
        raise RuntimeError("saved_tensor_bytes measures a forward pass; it cannot be run backward")

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        result = forward()
    del result
    alive.clear()
    return total


@dataclass(frozen=True)
class AllocatorReading:
    """torch's CUDA allocator at one moment, in bytes."""

    stage: str
    allocated: int
    reserved: int
    peak: int


def allocator_reading(stage: str) -> AllocatorReading | None:
    """Allocated, reserved and peak-allocated bytes now (``None`` without CUDA)."""
    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize()
    return AllocatorReading(
        stage,
        torch.cuda.memory_allocated(),
        torch.cuda.memory_reserved(),
        torch.cuda.max_memory_allocated(),
    )


def peak_bytes_of(fn: Callable[[], object]) -> int | None:
    """Peak bytes allocated while ``fn()`` runs, above what was allocated before it.

    ``None`` without CUDA. Resets the allocator's peak counter.
    """
    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before
