"""What pinned memory bought in notebook 04's run, what it cost and what it hid: from that run.

Pinning buys two things (PyTorch's guide "A guide on good usage of non_blocking and
pin_memory()", https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html): a faster copy,
since CUDA copies pageable memory through a page-locked staging buffer first, and an
asynchronous one, since ``non_blocking=True`` only queues a copy from pinned memory while a copy
from pageable memory makes the calling thread wait for it. It costs a copy into pinned memory,
which the DataLoader makes in a thread of its own (``pin_memory_thread`` in
``torch/utils/data/dataloader.py``), beside the training loop rather than inside its step.

So three different figures, none of them a share of the step by itself:

- the GPU's copy time from each kind of memory (from the profiles' ``Memcpy HtoD`` rows);
- the training thread's wait in ``.to(device)`` per batch, for each (:func:`host_wait_s`): what
  a non-blocking copy hides from it;
- the pin thread's time per batch (``x.pin_memory()``), and the share of that thread's time it
  takes at the pipeline's rate: it falls behind only when that share passes 100 %.

The verdict comes from the one timing method's ratio of the two pipelines' steps, with its
interval; :func:`explain_pinning` says how that compares with what the figures could explain.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from jupyter_gpu.measure import Ratio, fmt_seconds, synchronize

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


def host_wait_s(copy: Callable[[], object], *, calls: int, device: Any) -> float:
    """Seconds the calling thread spends in one ``copy()``, the mean of ``calls`` calls.

    The calls run back to back with no synchronisation between them, as a training loop makes
    them; the device is synchronised before and after, outside the time. A blocking copy's time
    is the copy and whatever was queued before it; a queued (non-blocking) one's, its launch.

    Raises:
        ValueError: ``calls`` < 1.
    """
    if calls < 1:
        raise ValueError(f"calls must be at least 1, not {calls}")
    synchronize(device)
    start = time.perf_counter()
    for _ in range(calls):
        copy()
    elapsed = time.perf_counter() - start
    synchronize(device)
    return elapsed / calls


@dataclass(frozen=True)
class PinningFigures:
    """One run's figures (seconds, bytes) for :func:`explain_pinning`.

    Attributes:
        ratio: the pinned pipeline's step against the plain one's (above 1: pinned is faster),
            from the one timing method.
        plain_step_s: the plain pipeline's step (median of the rounds).
        pinned_step_s: the pinned, non-blocking pipeline's step.
        pageable_copy_s: GPU time of one step's copies from pageable memory (a profile).
        pinned_copy_s: the same from pinned memory (another profile).
        batch_bytes: bytes copied per step.
        pin_s: CPU time to pin one batch (``x.pin_memory()``), in the pin thread.
        pageable_wait_s: the training thread's time in ``x.to(device)`` for a pageable batch.
        pinned_wait_s: its time in ``x.to(device, non_blocking=True)`` for a pinned one.
    """

    ratio: Ratio
    plain_step_s: float
    pinned_step_s: float
    pageable_copy_s: float
    pinned_copy_s: float
    batch_bytes: int
    pin_s: float
    pageable_wait_s: float
    pinned_wait_s: float

    @property
    def pin_thread_busy(self) -> float:
        """Share of the pin thread's time that pinning takes at the pinned pipeline's rate."""
        return self.pin_s / self.pinned_step_s

    @property
    def most_saved_s(self) -> float:
        """The most pinning could take off a step: the larger of the two savings it makes.

        The training thread waits less in ``.to()`` (``pageable_wait_s - pinned_wait_s``), and
        the GPU copies faster (``pageable_copy_s - pinned_copy_s``); the two overlap (the wait
        holds the copy), so the larger bounds what a step can gain.
        """
        return max(
            0.0,
            self.pageable_wait_s - self.pinned_wait_s,
            self.pageable_copy_s - self.pinned_copy_s,
        )


def explain_pinning(f: PinningFigures) -> list[str]:
    """What pinning bought, hid and cost in this run, and the measured verdict: one line each."""
    mib = f.batch_bytes / 2**20
    lines = [
        f"Bought: one step's copy ({mib:.2f} MiB) took {fmt_seconds(f.pageable_copy_s)} of GPU "
        f"time from pageable memory ({_gbps(f.batch_bytes, f.pageable_copy_s)}) and "
        f"{fmt_seconds(f.pinned_copy_s)} from pinned memory "
        f"({_gbps(f.batch_bytes, f.pinned_copy_s)}).",
        f"Hidden: the training thread spent {fmt_seconds(f.pageable_wait_s)} in x.to(device) "
        f"per pageable batch (a blocking copy: it waits for the copy and for the work queued "
        f"before it), and {fmt_seconds(f.pinned_wait_s)} per pinned batch with "
        "non_blocking=True (the copy is only queued).",
        f"Cost: pinning one batch took {fmt_seconds(f.pin_s)} of CPU (x.pin_memory(), measured "
        f"here). The DataLoader pins in a thread of its own, beside the step, not inside it: at "
        f"a step every {fmt_seconds(f.pinned_step_s)}, that thread is busy "
        f"{f.pin_thread_busy:.0%} of the time"
        + (
            ", so it cannot keep up: pinning is what the step waits for."
            if f.pin_thread_busy >= 1
            else " (it falls behind only above 100 %)."
        ),
    ]
    gained_s = f.plain_step_s - f.pinned_step_s
    saved = fmt_seconds(f.most_saved_s)
    if not f.ratio.measurable:
        # describe() already says "no measurable difference": say only what bounds it
        verdict = (
            f"the most pinning could take off a step here is {saved} "
            f"({f.most_saved_s / f.plain_step_s:.1%} of one)"
        )
    elif f.ratio.faster and gained_s <= f.most_saved_s:
        verdict = (
            f"faster by {fmt_seconds(gained_s)} a step, within the {saved} that the shorter wait "
            "and copy can save"
        )
    elif f.ratio.faster:
        verdict = (
            f"faster by {fmt_seconds(gained_s)} a step, more than the {saved} that the shorter "
            "wait and copy can save: no cause for the rest is in these figures"
        )
    elif f.pin_thread_busy >= 1:
        verdict = (
            f"slower by {fmt_seconds(-gained_s)} a step: the pin thread needs more time per batch "
            "than a step takes"
        )
    else:
        verdict = (
            f"slower by {fmt_seconds(-gained_s)} a step, while the pin thread had time to spare: "
            "no cause is in these figures"
        )
    lines.append(f"Measured, pinned against plain: {f.ratio.describe()}: {verdict}.")
    return lines


def _gbps(nbytes: int, seconds: float) -> str:
    return f"{nbytes / seconds / 1e9:.1f} GB/s" if seconds > 0 else "not measured"
