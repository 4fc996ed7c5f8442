"""torch's CUDA caching allocator, and NVML's view of this process, as small records."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from jupyter_gpu.magics.shell.lazy_torch import cuda_in_use, torch_module


@dataclass(frozen=True)
class AllocatorStats:
    """The caching allocator's counters for one CUDA device (bytes; counts since start).

    ``torch.cuda.memory_stats`` keys: ``allocated_bytes.all.current``, ``.peak``,
    ``reserved_bytes.all.current``, ``num_alloc_retries``, ``num_ooms``. ``nvidia-smi`` shows
    the process's total, which adds the CUDA context and other libraries to ``reserved``.
    """

    device: int
    allocated_bytes: int
    reserved_bytes: int
    peak_bytes: int
    alloc_retries: int
    ooms: int
    initialized: bool

    @property
    def fragmentation_bytes(self) -> int:
        """Reserved but not allocated: cached blocks, usable by torch only, often fragmented."""
        return self.reserved_bytes - self.allocated_bytes

    @classmethod
    def read(cls, device: int) -> AllocatorStats:
        """Read the counters; zeros, ``initialized=False``, if this kernel has not used CUDA."""
        if not cuda_in_use():
            return cls(device, 0, 0, 0, 0, 0, initialized=False)
        import torch  # loaded already: CUDA is in use through it

        stats: dict[str, Any] = torch.cuda.memory_stats(device)
        return cls(
            device=device,
            allocated_bytes=int(stats.get("allocated_bytes.all.current", 0)),
            reserved_bytes=int(stats.get("reserved_bytes.all.current", 0)),
            peak_bytes=int(stats.get("allocated_bytes.all.peak", 0)),
            alloc_retries=int(stats.get("num_alloc_retries", 0)),
            ooms=int(stats.get("num_ooms", 0)),
            initialized=True,
        )


@dataclass(frozen=True)
class NvmlProcessView:
    """What NVML says this process uses on one GPU, or why it cannot say (``reason``)."""

    used_bytes: int | None
    total_bytes: int | None
    device_used_bytes: int | None
    reason: str | None


def norm_uuid(uuid: object) -> str:
    """A GPU UUID as NVML and torch both can be compared by ("GPU-" prefix dropped, lower case)."""
    text = str(uuid).lower()
    return text[4:] if text.startswith("gpu-") else text


def torch_uuid(index: int) -> str | None:
    """The UUID of torch's CUDA device ``index`` (normalised), ``None`` if torch cannot say."""
    torch_module()  # the UsageError that says how to install torch, where it is missing
    import torch

    try:
        return norm_uuid(torch.cuda.get_device_properties(index).uuid)
    except (AttributeError, RuntimeError):
        return None


def match_nvml_device(devices: Any, index: int) -> Any | None:
    """NVML's record of torch's CUDA device ``index``.

    Matched by UUID; else by index where both numberings must agree (as many devices on both
    sides, and no ``CUDA_VISIBLE_DEVICES`` unless there is only one).
    """
    wanted = torch_uuid(index)
    match = next((d for d in devices if d.uuid and norm_uuid(d.uuid) == wanted), None)
    if match is not None:
        return match
    torch_module()
    import torch

    same_count = len(devices) == torch.cuda.device_count()
    # CUDA_VISIBLE_DEVICES can reorder devices; with one device on each side it cannot.
    if same_count and ("CUDA_VISIBLE_DEVICES" not in os.environ or len(devices) == 1):
        return next((d for d in devices if d.index == index), None)
    return None


def nvml_process_view(device: int) -> NvmlProcessView:
    """NVML's reading of this process on CUDA device ``device`` (matched by UUID).

    Reads through ``jupyter_gpu.sampling.read_once`` (about 0.1 s; a GPU that does not answer
    within its 2 s deadline is named in ``reason``). NVML's per-process memory is what
    ``nvidia-smi`` lists for this PID.
    """
    from jupyter_gpu.sampling import read_once

    sample = read_once()
    if not sample.devices:
        return NvmlProcessView(None, None, None, sample.reason or "NVML sees no GPU")
    match = match_nvml_device(sample.devices, device)
    if match is None:
        # A GPU that did not answer has no UUID to match by: say which one (read_once's error).
        hung = [d.error for d in sample.devices if d.state == "not_responding" and d.error]
        reason = "; ".join(hung) or "could not match the CUDA device to NVML's"
        return NvmlProcessView(None, None, None, reason)
    if match.state != "ok":
        return NvmlProcessView(None, match.mem_total_bytes, None, match.error or match.state)
    pid = os.getpid()
    mine = [p for p in match.processes if p.pid == pid]
    if not mine:
        reason = (
            "NVML does not list this process (in a container it may see other PIDs)"
            if match.processes
            else "NVML lists no processes on this GPU (not supported here, or none yet)"
        )
        return NvmlProcessView(None, match.mem_total_bytes, match.mem_used_bytes, reason)
    used = mine[0].used_mem_bytes
    why = None if used is not None else "NVML does not report per-process memory here"
    return NvmlProcessView(used, match.mem_total_bytes, match.mem_used_bytes, why)
