"""Size the batch from measured memory instead of halving it by hand until it fits.

One trial step at a batch that fits tells the memory a step needs: what was allocated before it
(weights and optimizer state: *static*), its peak, and the gradients (as large as the weights
they belong to: *fixed*, whatever the batch). What remains of the peak grows with the batch:

    per sample = (trial peak - static - fixed) / trial batch

The budget is what this process may hold: the device's free memory (``torch.cuda.mem_get_info``)
plus what torch's allocator has reserved already, capped where a limit is set (a size tier
emulated with ``set_per_process_memory_fraction``). The batch is the largest whose predicted
peak stays ``margin`` below the budget (the allocator needs room to split and round blocks).

The prediction is of allocated memory; what the allocator's cache can hand out also depends on
how its cached segments are cut up (fragmentation: earlier steps at other sizes, an earlier
out-of-memory error), which no trial measures. So the fitted batch is run once before it is
trusted (``settle_batch``): if it runs out of memory, the batch steps down and tries again.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

import torch

GiB = 2**30
#: A failed batch steps down by this fraction of itself (at least one sample).
STEP_DOWN = 1 / 8

T = TypeVar("T")

# The CUDA allocator's out-of-memory message, as c10's format_size writes its sizes.
_UNALLOCATED = re.compile(r"([0-9.]+) (bytes|KiB|MiB|GiB) is reserved by PyTorch but unallocated")
_UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def memory_budget(limit_bytes: int | None = None, device: int | None = None) -> int:
    """Bytes this process's allocator can reach: free on the device plus reserved by torch.

    ``limit_bytes`` (an allocator cap) bounds it. Needs CUDA.
    """
    free, _total = torch.cuda.mem_get_info(device)
    usable = int(free) + int(torch.cuda.memory_reserved(device))
    return usable if limit_bytes is None else min(usable, int(limit_bytes))


def gradient_bytes(parameters: Iterable[torch.Tensor]) -> int:
    """Bytes of the gradients of ``parameters`` (each the size and dtype of its parameter)."""
    return sum(p.numel() * p.element_size() for p in parameters if p.requires_grad)


@dataclass(frozen=True)
class BatchFit:
    """A batch chosen from one trial step's measured memory (bytes)."""

    trial_batch: int
    static_bytes: int
    trial_peak_bytes: int
    fixed_bytes: int
    budget_bytes: int
    margin: float
    batch: int
    #: The batch is a multiple of this (a smaller one, after an out-of-memory error, too).
    multiple: int = 1
    #: What the measurements keep on the GPU beside the step: the copy of the weights and the
    #: optimizer state that ``%profile`` and the interleaved timer save to put them back.
    copy_bytes: int = 0

    @property
    def per_sample_bytes(self) -> float:
        """Peak memory that each sample of the batch adds."""
        grown = self.trial_peak_bytes - self.static_bytes - self.fixed_bytes
        return grown / self.trial_batch

    def predicted_peak_bytes(self, batch: int | None = None) -> float:
        """The peak a measured step at ``batch`` (default: the chosen one) should reach.

        The step's own peak, plus the copy the measurements keep beside it (``copy_bytes``).
        """
        size = self.batch if batch is None else batch
        return self.static_bytes + self.fixed_bytes + self.copy_bytes + size * self.per_sample_bytes

    def describe(self) -> str:
        """How the batch follows from the measurements, in one paragraph."""
        return (
            f"trial step at batch {self.trial_batch}: peak {self.trial_peak_bytes / GiB:.2f} GiB "
            f"= {self.static_bytes / GiB:.2f} GiB before the step (weights, optimizer state) + "
            f"{self.fixed_bytes / GiB:.2f} GiB of gradients + {self.per_sample_bytes / GiB:.3f} "
            f"GiB per sample; budget {self.budget_bytes / GiB:.1f} GiB less {self.margin:.0%}"
            + (
                f" and less {self.copy_bytes / GiB:.2f} GiB for the copy of the weights and "
                "optimizer state that the measurements keep on the GPU to put them back"
                if self.copy_bytes
                else ""
            )
            + " "
            f"-> batch {self.batch} (predicted peak {self.predicted_peak_bytes() / GiB:.1f} GiB)"
        )


def fit_batch(
    *,
    trial_batch: int,
    static_bytes: int,
    trial_peak_bytes: int,
    fixed_bytes: int,
    budget_bytes: int,
    margin: float = 0.1,
    multiple: int = 1,
    copy_bytes: int = 0,
) -> BatchFit:
    """The largest batch (a multiple of ``multiple``, at least 1) that fits the budget.

    Raises:
        ValueError: the trial measured no memory that grows with the batch, or a figure is
            negative, or ``margin`` is not in [0, 1).
    """
    sizes = (static_bytes, fixed_bytes, budget_bytes, copy_bytes)
    if trial_batch < 1 or multiple < 1 or min(sizes) < 0:
        raise ValueError("batch sizes must be positive and byte counts not negative")
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin must be in [0, 1), not {margin}")
    grown = trial_peak_bytes - static_bytes - fixed_bytes
    if grown <= 0:
        raise ValueError(
            f"the trial step's peak ({trial_peak_bytes:,} bytes) is not above the static and "
            f"fixed memory ({static_bytes + fixed_bytes:,}): measure a real training step"
        )
    room = budget_bytes * (1.0 - margin) - static_bytes - fixed_bytes - copy_bytes
    batch = int(room // (grown / trial_batch)) // multiple * multiple
    return BatchFit(
        trial_batch,
        static_bytes,
        trial_peak_bytes,
        fixed_bytes,
        budget_bytes,
        margin,
        max(1, batch),
        multiple,
        copy_bytes,
    )


@dataclass(frozen=True)
class GraphsRoom:
    """Whether CUDA graphs of a step fit beside the step they are timed against (bytes).

    ``mode="reduce-overhead"`` records the step into a memory pool of the graphs' own, which
    keeps what one step allocates (its gradients and activations) for as long as the graphs
    live. The comparison runs the step as it is beside them, up to its own measured peak
    (``step_peak_bytes``), which already holds the weights and optimizer state
    (``static_bytes``) and the copy of both that the measurements keep to put them back
    (``copy_bytes``). What the step allocates is its peak less those two, so the graphs and the
    step together need ``2 * peak - static - copy``.

    A capture that cannot fit fails only after the blocks were compiled again for it, and in
    torch builds without pytorch/pytorch#190348's fix it can keep its pool reserved until the
    process ends, where a process started later on the same GPU (the capstone's ``%%torchrun``
    ranks) finds that memory gone; torch 2.11.0+cu130 kept none
    (``benchmarks/cudagraph_oom_leak.py`` on one H200, 2026-12-05). So the capstone records
    graphs only where this room is there.
    """

    step_peak_bytes: int
    static_bytes: int
    copy_bytes: int
    budget_bytes: int
    margin: float = 0.1

    def __post_init__(self) -> None:
        """Refuse figures that are not a measured step's.

        Raises:
            ValueError: a figure is negative, the peak is below the static memory and the copy,
                or ``margin`` is not in [0, 1).
        """
        if min(self.step_peak_bytes, self.static_bytes, self.copy_bytes, self.budget_bytes) < 0:
            raise ValueError("byte counts must not be negative")
        if self.step_peak_bytes < self.static_bytes + self.copy_bytes:
            raise ValueError(
                f"the step's peak ({self.step_peak_bytes:,} bytes) is below the weights, "
                f"optimizer state and their copy ({self.static_bytes + self.copy_bytes:,}): "
                "measure the peak over the step"
            )
        if not 0.0 <= self.margin < 1.0:
            raise ValueError(f"margin must be in [0, 1), not {self.margin}")

    @property
    def step_bytes(self) -> int:
        """What one step allocates: its peak less the weights, optimizer state and copy."""
        return self.step_peak_bytes - self.static_bytes - self.copy_bytes

    @property
    def need_bytes(self) -> int:
        """The step's peak plus the graphs' pool, which keeps one step's allocations."""
        return self.step_peak_bytes + self.step_bytes

    @property
    def fits(self) -> bool:
        """The need stays ``margin`` below the budget (the margin ``fit_batch`` keeps)."""
        return self.need_bytes <= self.budget_bytes * (1.0 - self.margin)

    def describe(self) -> str:
        """The sum and the budget, in one sentence."""
        return (
            f"the step as it is peaks at {self.step_peak_bytes / GiB:.1f} GiB (weights and "
            f"optimizer state {self.static_bytes / GiB:.1f} GiB, the measurements' copy of them "
            f"{self.copy_bytes / GiB:.1f} GiB, the step's own {self.step_bytes / GiB:.1f} GiB), "
            f"and the graphs' pool would keep another {self.step_bytes / GiB:.1f} GiB: "
            f"{self.need_bytes / GiB:.1f} GiB against a budget of {self.budget_bytes / GiB:.1f} "
            f"GiB less {self.margin:.0%}"
        )


def smaller_batch(batch: int, multiple: int = 1) -> int:
    """The batch to try after ``batch`` ran out of memory; 0 if there is none smaller.

    An eighth less (at least one sample less), rounded down to a multiple of ``multiple``.
    """
    if batch < 1 or multiple < 1:
        raise ValueError("batch sizes must be positive")
    target = batch - max(1, int(batch * STEP_DOWN))
    return target // multiple * multiple


def unusable_bytes_at(error: torch.OutOfMemoryError) -> int | None:
    """Bytes the allocator held but had not allocated when ``error`` was raised, if known.

    The allocator's message says it ("... 1.90 GiB is reserved by PyTorch but unallocated"):
    it had already released the cached segments it could, so these are held in segments partly
    in use, which it could not use for the request (fragmentation). Without that sentence,
    reserved minus allocated now (CUDA), else ``None``.
    """
    found = _UNALLOCATED.search(str(error))
    if found is not None:
        return int(float(found.group(1)) * _UNITS[found.group(2)])
    if not torch.cuda.is_available():
        return None
    return int(torch.cuda.memory_reserved()) - int(torch.cuda.memory_allocated())


def release_cache() -> None:
    """Free what Python no longer uses, then torch's cached but unallocated CUDA memory.

    A new batch size cuts the cache into new block sizes; the old, odd-sized segments would
    otherwise stay reserved beside them (``torch.cuda.empty_cache``).
    """
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()  # a no-op until CUDA has started


def miss_line(
    batch: int, next_batch: int, unusable_bytes: int | None, fit: BatchFit | None = None
) -> str:
    """One line for a batch that ran out of memory: the prediction, the cache, what comes next."""
    if fit is not None:
        line = (
            f"the prediction missed: batch {batch} ran out of memory, predicted to peak at "
            f"{fit.predicted_peak_bytes(batch) / GiB:.1f} GiB (budget "
            f"{fit.budget_bytes / GiB:.1f} GiB)"
        )
    else:
        line = f"batch {batch} ran out of memory"
    if unusable_bytes is not None:
        line += (
            f"; the allocator held {unusable_bytes / GiB:.2f} GiB it could not use (reserved "
            "but not allocated at the failure: fragmentation)"
        )
    return f"{line}; trying batch {next_batch}"


def settle_batch(
    batch: int,
    try_batch: Callable[[int], T],
    *,
    fit: BatchFit | None = None,
    attempts: int = 5,
    unusable_bytes: Callable[[torch.OutOfMemoryError], int | None] = unusable_bytes_at,
    say: Callable[[str], object] = print,
) -> tuple[int, T]:
    """Run ``try_batch(batch)``; on ``torch.OutOfMemoryError``, step down and try again.

    A batch that runs out of memory is followed by ``smaller_batch`` of it (a multiple of
    ``fit.multiple``), and ``say`` gets one line (``miss_line``) with ``unusable_bytes`` of the
    error. ``try_batch`` should begin by dropping what a failed attempt left (its gradients)
    and then release the cache (``release_cache``): this function holds nothing of a failed
    attempt, not even its error, when it calls ``try_batch`` again.

    Returns:
        The batch that ran, and what ``try_batch`` returned for it.

    Raises:
        torch.OutOfMemoryError: the last of ``attempts`` batches, or batch 1 (or the smallest
            multiple), ran out of memory too.
        ValueError: ``attempts`` is below 1.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, not {attempts}")
    multiple = fit.multiple if fit is not None else 1
    attempt = 1
    while True:
        try:
            return batch, try_batch(batch)
        except torch.OutOfMemoryError as error:
            next_batch = smaller_batch(batch, multiple)
            if attempt >= attempts or next_batch < 1:
                raise
            say(miss_line(batch, next_batch, unusable_bytes(error), fit))
        # Out of the except block the error is gone, with its traceback and the failed step's
        # tensors that the traceback's frames held: the next attempt can free them.
        batch, attempt = next_batch, attempt + 1
