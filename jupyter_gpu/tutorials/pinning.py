"""What pinned memory bought in notebook 04's run: sentences built from that run's figures.

Pinning buys two things (PyTorch's guide "A guide on good usage of non_blocking and
pin_memory()"): a faster copy, since CUDA copies pageable memory through a page-locked
staging buffer first, and an asynchronous one, since ``non_blocking=True`` queues a copy from
pinned memory without making the CPU wait. It costs a copy into pinned memory (the
DataLoader's pin thread makes it, in the training process), and the same guide warns that
``tensor.pin_memory().to(device, non_blocking=True)`` can be up to twice as slow as
``tensor.to(device)``. Whether it helps depends on whether the step waits on the copy: these
functions say which, from the profile's copy times and the measured throughputs, and say so
when the figures explain nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from jupyter_gpu.measure import fmt_seconds

from .pipeline import Throughput

GUIDE_URL = "https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html"


@dataclass(frozen=True)
class HostCopies:
    """The host-to-device copies of one ``%%profile`` run (GPU seconds, as the GPU ran them)."""

    calls: int
    gpu_s: float
    #: True: all from pinned memory; False: all from pageable; None: none, or both kinds.
    pinned: bool | None

    def per_step(self, steps: int) -> float:
        """GPU seconds of copying per training step."""
        return self.gpu_s / steps


def host_copies(rows: Iterable[Any]) -> HostCopies:
    """The ``Memcpy HtoD (...)`` rows of a profile (``ProfileResult.rows``), added up.

    CUPTI names the copy by its source: ``Memcpy HtoD (Pageable -> Device)`` or
    ``Memcpy HtoD (Pinned -> Device)``.
    """
    calls, seconds, kinds = 0, 0.0, set()
    for row in rows:
        if not row.name.startswith("Memcpy HtoD"):
            continue
        calls += row.calls
        seconds += row.self_gpu_s
        kinds.add("Pinned" in row.name)
    return HostCopies(calls, seconds, kinds.pop() if len(kinds) == 1 else None)


def compare(before: Throughput, after: Throughput) -> tuple[float, bool]:
    """``(after / before - 1, whether that is beyond the larger spread of the two)``."""
    change = after.median / before.median - 1
    return change, abs(change) > max(before.spread, after.spread)


def change_text(before: Throughput, after: Throughput) -> str:
    """``+12%, beyond the 4% spread of the windows`` or ``-2%, within the 6% spread ...``."""
    change, beyond = compare(before, after)
    spread = max(before.spread, after.spread)
    where = "beyond" if beyond else "within"
    return f"{change:+.0%}, {where} the {spread:.0%} spread of the timed windows"


def explain_pinning(
    *,
    plain: Throughput,
    pinned: Throughput,
    pageable_copy_s: float,
    pinned_copy_s: float,
    batch_bytes: int,
    pin_s: float,
    batch: int,
    host_idle_share: float | None,
) -> list[str]:
    """Why pinning did what it did in this run, one sentence per question.

    Args:
        plain: throughput with pageable memory and blocking copies.
        pinned: the same pipeline with ``pin_memory=True`` and ``non_blocking=True``.
        pageable_copy_s: GPU time of one step's copies from pageable memory (a profile).
        pinned_copy_s: the same from pinned memory (another profile).
        batch_bytes: bytes copied per step.
        pin_s: CPU time to pin one batch (``x.pin_memory()``, measured).
        batch: images per step.
        host_idle_share: of the pinned profile's GPU idle time, the share spent waiting on the
            host (``None``: not measured).
    """
    step_s = batch / pinned.median
    mib = batch_bytes / 2**20
    saving = max(0.0, pageable_copy_s - pinned_copy_s) / step_s
    pin_share = pin_s / step_s
    lines = [
        f"Bought: one step's copy ({mib:.2f} MiB) took {fmt_seconds(pageable_copy_s)} of GPU "
        f"time from pageable memory ({_gbps(batch_bytes, pageable_copy_s)}) and "
        f"{fmt_seconds(pinned_copy_s)} from pinned memory ({_gbps(batch_bytes, pinned_copy_s)}); "
        "with non_blocking=True the CPU queued it and moved on.",
        f"Cost: pinning one batch took {fmt_seconds(pin_s)} of CPU (x.pin_memory(), measured "
        "here); the DataLoader does it in a thread of the training process.",
    ]
    waits = (
        f", and {host_idle_share:.0%} of the GPU's idle time was spent waiting on the host"
        if host_idle_share is not None
        else ""
    )
    lines.append(
        f"Does the step wait on the copy? A step took {fmt_seconds(step_s)}; the copy was "
        f"{pageable_copy_s / step_s:.1%} of it{waits}. A faster copy can save at most "
        f"{saving:.1%} of a step, and pinning costs {pin_share:.1%} of one."
    )
    change, beyond = compare(plain, pinned)
    measured = f"Measured: {plain} without, {pinned} with: {change_text(plain, pinned)}"
    spread = max(plain.spread, pinned.spread)
    if not beyond and saving <= spread:
        verdict = (
            f"no effect measured, as expected: the most a faster copy could save ({saving:.1%}) "
            "is smaller than the spread."
        )
    elif not beyond:
        verdict = (
            f"no effect measured, although a faster copy could save up to {saving:.1%}: no cause "
            "is in these figures."
        )
    elif change > 0 and change <= 2 * saving:
        verdict = "faster, about what the shorter copy can save."
    elif change > 0:
        verdict = (
            f"faster by more than the shorter copy ({saving:.1%}) explains: no cause for the "
            "rest is in these figures."
        )
    elif -change <= 2 * pin_share:
        verdict = "slower, about what pinning costs: here it costs more than it saves."
    else:
        verdict = (
            f"slower, by more than pinning costs here ({pin_share:.1%} of a step): no cause "
            "for the rest is in these figures."
        )
    lines.append(f"{measured}: {verdict}")
    return lines


def _gbps(nbytes: int, seconds: float) -> str:
    return f"{nbytes / seconds / 1e9:.1f} GB/s" if seconds > 0 else "not measured"
