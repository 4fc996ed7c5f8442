"""Memory measurements for notebook 03: what autograd saves, and the allocator's peaks.

:func:`saved_tensor_bytes` works on any device: it counts the bytes of the tensors autograd
keeps for the backward pass (the activations), through ``saved_tensors_hooks``, and
:func:`measured_peak` measures a call's peak on a CPU as on a GPU. The allocator helpers read
torch's CUDA caching allocator and return ``None`` without CUDA; :func:`read_oom_message` picks
the figures out of an out-of-memory error's message.
"""

from __future__ import annotations

import re
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


@dataclass(frozen=True)
class PeakReading:
    """The peak bytes a call allocated above what was allocated before it, and how it was read."""

    bytes: int
    source: str


def measured_peak(fn: Callable[[], object], device: str) -> PeakReading:
    """Run ``fn()`` once and measure the peak it allocated on ``device`` (``cuda`` or ``cpu``).

    On CUDA this is the caching allocator's peak counter (``torch.cuda.max_memory_allocated``,
    reset first). torch's CPU allocator keeps no such counter, so on a CPU the call runs under
    ``torch.profiler`` with ``profile_memory=True``, whose records list every allocation and free
    of the CPU allocator with its size: their running sum, in time order, peaks where the call
    held the most. (Profiling makes the call slower, not larger.)
    """
    if device == "cuda":
        peak = peak_bytes_of(fn)
        assert peak is not None  # a CUDA device was asked for
        return PeakReading(peak, "torch.cuda.max_memory_allocated()")
    from torch._C._autograd import DeviceType  # what the profiler's events carry
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    records = [
        event
        for event in prof.profiler.kineto_results.events()
        if event.name() == "[memory]" and event.device_type() == DeviceType.CPU
    ]
    held = peak = 0
    for event in sorted(records, key=lambda e: e.start_ns()):
        held += event.nbytes()  # an allocation adds its size, a free subtracts it
        peak = max(peak, held)
    return PeakReading(peak, "the CPU allocator's records (torch.profiler, profile_memory=True)")


_SIZE = r"([\d.]+ [KMGT]?i?B|0 bytes)"
_OOM_PARTS = {
    "tried": rf"Tried to allocate {_SIZE}",
    "capacity": rf"total capac\w+ of {_SIZE}",
    "free": rf"of which {_SIZE} is free",
    "allowed": rf"{_SIZE} allowed",
    "by_pytorch": rf"{_SIZE} is allocated by PyTorch",
    "reserved_unallocated": rf"{_SIZE} is reserved by PyTorch but unallocated",
    "hint": r"try setting (\S+) to avoid fragmentation",
}


@dataclass(frozen=True)
class OomMessage:
    """The parts of a CUDA out-of-memory message (``None``: not in this torch's wording)."""

    text: str
    tried: str | None
    capacity: str | None
    free: str | None
    allowed: str | None
    by_pytorch: str | None
    reserved_unallocated: str | None
    hint: str | None

    def bytes_of(self, part: str) -> int | None:
        """A size part in bytes (``"150.00 MiB"`` -> 157286400), ``None`` where it is missing."""
        text = getattr(self, part)
        if text is None:
            return None
        number, _, unit = text.partition(" ")
        scale = {"bytes": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
        return int(float(number) * scale.get(unit, 1))


def read_oom_message(text: str) -> OomMessage:
    """Pick the figures out of ``str(torch.OutOfMemoryError)``.

    The message reads, in torch 2.x: "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has
    a total capacity of 139.81 GiB of which 120.5 GiB is free. 11.08 GiB allowed; Of the
    allocated memory 10.9 GiB is allocated by PyTorch, and 150 MiB is reserved by PyTorch but
    unallocated. If reserved but unallocated memory is large try setting
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation. ..." (the
    "allowed" part only under a per-process cap; older torch named ``max_split_size_mb``).
    """
    found = {key: re.search(pattern, text) for key, pattern in _OOM_PARTS.items()}
    parts = {key: (m.group(1) if m else None) for key, m in found.items()}
    return OomMessage(text=text, **parts)


@dataclass(frozen=True)
class OomVerdict:
    """Why an out-of-memory error happened, read from what was measured.

    ``cause`` is ``"cap"`` (the step needs more than the process may hold: no allocator setting
    makes it fit), ``"fragmentation"`` (it fits on paper, and the allocator held enough reserved
    but unallocated bytes for the failed request, just not in one piece) or ``"unexplained"``
    (it fits on paper and the cache was smaller than the request: something else held memory).
    ``sentence`` says it with the figures.
    """

    cause: str
    sentence: str


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:,.0f} MiB"


def oom_verdict(
    need_bytes: int, cap_bytes: int, tried_bytes: int | None, cached_bytes: int | None
) -> OomVerdict:
    """Compare a step's measured need with the cap first, the message's figures second.

    Args:
        need_bytes: what the step holds at its peak: allocated before it plus its peak above
            that, measured without the cap (``torch.cuda.max_memory_allocated``).
        cap_bytes: the most this process may hold (``set_per_process_memory_fraction`` x the
            GPU's memory). torch's allocator checks the cap against *reserved* memory, which is
            never below allocated, so a need above the cap cannot fit whatever the cache does.
        tried_bytes: the failed request, from the error message (:func:`read_oom_message`);
            ``None`` where the message lacks it.
        cached_bytes: the reserved-but-unallocated bytes when it failed, from the message;
            ``None`` where the message lacks them.
    """
    cached = (
        f"; the {_gib(cached_bytes)} reserved but unallocated" if cached_bytes is not None else ""
    )
    if need_bytes > cap_bytes:
        short = need_bytes - cap_bytes
        tail = (
            f"{cached} when it failed could not have covered that, fragmented or not"
            if cached_bytes is not None and cached_bytes < short
            else f"{cached} when it failed is beside the point: had it served the request, "
            "a later one in the same step would have failed"
            if cached_bytes is not None
            else ""
        )
        return OomVerdict(
            "cap",
            f"the step needs {_gib(need_bytes)} at its peak (measured without the cap) and the "
            f"cap allows {_gib(cap_bytes)}: {_gib(short)} short{tail}. No allocator setting "
            "makes it fit: hold less at once (a smaller batch, checkpointing)",
        )
    if tried_bytes is not None and cached_bytes is not None and cached_bytes >= tried_bytes:
        return OomVerdict(
            "fragmentation",
            f"the step needs {_gib(need_bytes)}, within the cap of {_gib(cap_bytes)}, and the "
            f"allocator held {_gib(cached_bytes)} reserved but unallocated against the "
            f"{_gib(tried_bytes)} it asked for: enough bytes, not in one piece. That is "
            "fragmentation",
        )
    return OomVerdict(
        "unexplained",
        f"the step needs {_gib(need_bytes)}, within the cap of {_gib(cap_bytes)}, and the cache "
        + (
            f"({_gib(cached_bytes)}) was smaller than the request ({_gib(tried_bytes)})"
            if tried_bytes is not None and cached_bytes is not None
            else "figures are not in this message"
        )
        + ": memory this measurement does not see was held (tensors allocated since, another "
        "stream's blocks)",
    )
