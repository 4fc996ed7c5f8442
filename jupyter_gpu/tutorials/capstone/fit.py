"""Size the batch from measured memory instead of halving it by hand until it fits.

One trial step at a batch that fits tells the memory a step needs: what was allocated before it
(weights and optimizer state: *static*), its peak, and the gradients (as large as the weights
they belong to: *fixed*, whatever the batch). What remains of the peak grows with the batch:

    per sample = (trial peak - static - fixed) / trial batch

The budget is what this process may hold: the device's free memory (``torch.cuda.mem_get_info``)
plus what torch's allocator has reserved already, capped where a limit is set (a size tier
emulated with ``set_per_process_memory_fraction``). The batch is the largest whose predicted
peak stays ``margin`` below the budget (the allocator needs room to split and round blocks).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

GiB = 2**30


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

    @property
    def per_sample_bytes(self) -> float:
        """Peak memory that each sample of the batch adds."""
        grown = self.trial_peak_bytes - self.static_bytes - self.fixed_bytes
        return grown / self.trial_batch

    def predicted_peak_bytes(self, batch: int | None = None) -> float:
        """The peak a step at ``batch`` (default: the chosen one) should reach."""
        size = self.batch if batch is None else batch
        return self.static_bytes + self.fixed_bytes + size * self.per_sample_bytes

    def describe(self) -> str:
        """How the batch follows from the measurements, in one paragraph."""
        return (
            f"trial step at batch {self.trial_batch}: peak {self.trial_peak_bytes / GiB:.2f} GiB "
            f"= {self.static_bytes / GiB:.2f} GiB before the step (weights, optimizer state) + "
            f"{self.fixed_bytes / GiB:.2f} GiB of gradients + {self.per_sample_bytes / GiB:.3f} "
            f"GiB per sample; budget {self.budget_bytes / GiB:.1f} GiB less {self.margin:.0%} "
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
) -> BatchFit:
    """The largest batch (a multiple of ``multiple``, at least 1) that fits the budget.

    Raises:
        ValueError: the trial measured no memory that grows with the batch, or a figure is
            negative, or ``margin`` is not in [0, 1).
    """
    if trial_batch < 1 or multiple < 1 or min(static_bytes, fixed_bytes, budget_bytes) < 0:
        raise ValueError("batch sizes must be positive and byte counts not negative")
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin must be in [0, 1), not {margin}")
    grown = trial_peak_bytes - static_bytes - fixed_bytes
    if grown <= 0:
        raise ValueError(
            f"the trial step's peak ({trial_peak_bytes:,} bytes) is not above the static and "
            f"fixed memory ({static_bytes + fixed_bytes:,}): measure a real training step"
        )
    room = budget_bytes * (1.0 - margin) - static_bytes - fixed_bytes
    batch = int(room // (grown / trial_batch)) // multiple * multiple
    return BatchFit(
        trial_batch,
        static_bytes,
        trial_peak_bytes,
        fixed_bytes,
        budget_bytes,
        margin,
        max(1, batch),
    )
