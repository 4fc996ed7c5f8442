"""The checks of notebook 04's exercises: the top kernel (3.1) and the worker count (4.1).

The worker count is judged with the one timing method (``jupyter_gpu.measure.compare``): a
count beats another only when its ratio's interval lies above 1, never by a fixed percentage
against windows that vary more than that.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jupyter_gpu.measure import Comparison, Ratio, fmt_seconds

from .exercises import Feedback, check

#: CUPTI's names for GPU work that is not a kernel: copies and memsets (the copy engines).
_NOT_KERNELS = ("Memcpy", "Memset")


def _on_gpu(entry: Any) -> bool:
    return str(getattr(entry, "device_type", "CPU")).rsplit(".", 1)[-1] != "CPU"


def _is_annotation(entry: Any) -> bool:
    # The profiler's own word for a record_function range (ours, the DataLoader's, the
    # optimizer's, ProfilerStep#N): a span that holds many ops, not an op or a kernel.
    return bool(getattr(entry, "is_user_annotation", False))


def top_kernel(averages: Iterable[Any], gpu: bool) -> Any:
    """The entry of ``prof.key_averages()`` the exercise asks for.

    With a GPU: the kernel (device-side, neither a user annotation nor a copy or memset) with
    the most ``self_device_time_total``. Without one: the op (not an annotation) with the most
    ``self_cpu_time_total``.

    Raises:
        ValueError: the profile has no such entry.
    """
    if gpu:
        candidates = [
            e
            for e in averages
            if _on_gpu(e) and not _is_annotation(e) and not str(e.key).startswith(_NOT_KERNELS)
        ]
        field = "self_device_time_total"
    else:
        candidates = [e for e in averages if not _on_gpu(e) and not _is_annotation(e)]
        field = "self_cpu_time_total"
    if not candidates:
        raise ValueError("the profile holds no kernel (GPU) or op (CPU): profile some steps")
    return max(candidates, key=lambda e: getattr(e, field))


def check_top_kernel(averages: Iterable[Any], name: object, gpu: bool) -> Feedback:
    """Exercise 3.1: whether ``name`` is :func:`top_kernel`'s, and if not, what it is instead."""
    entries = list(averages)
    top = top_kernel(entries, gpu)
    field = "self_device_time_total" if gpu else "self_cpu_time_total"
    what = "kernel" if gpu else "op"
    seconds = getattr(top, field) / 1e6
    if name == top.key:
        spent = fmt_seconds(seconds)
        return check(True, f"{top.key!r} is the {what} with the most {field} ({spent})", "")
    named = [e for e in entries if e.key == name]
    if not isinstance(name, str) or not named:
        hint = f"{name!r} is not an entry of prof.key_averages(): copy its key (a string)"
    elif any(_is_annotation(e) for e in named):
        inside = (
            "its GPU time is the span from the first kernel inside it to the last, gaps "
            "included (which is how it can exceed 100%)"
            if gpu
            else "its self CPU time is the Python work inside it that ran no op"
        )
        hint = (
            f"{name!r} is a user annotation (is_user_annotation: a record_function range, not "
            f"{'a kernel' if gpu else 'an op'}): {inside}; skip the entries whose "
            "is_user_annotation is True"
        )
    elif gpu and str(name).startswith(_NOT_KERNELS):
        hint = f"{name!r} is a copy or memset (the copy engines), not a kernel"
    elif gpu and not any(_on_gpu(e) for e in named):
        hint = (
            f"{name!r} is an op on the CPU: its GPU time is that of the kernels it launched; "
            "look at the entries whose device_type is CUDA"
        )
    else:
        kind = "a kernel" if gpu else "an op"
        hint = f"{name!r} is {kind}, but not the one with the most {field}"
    return check(False, "", hint)


WORKERS_PREFIX = "num_workers="


def worker_variant(workers: int) -> str:
    """The name a worker count's variant has in the exercise's comparison: ``num_workers=N``."""
    return f"{WORKERS_PREFIX}{workers}"


def measured_counts(comparison: Comparison) -> dict[int, str]:
    """``{worker count: variant name}`` of the comparison's ``num_workers=N`` variants."""
    counts: dict[int, str] = {}
    for name in comparison:
        number = name.removeprefix(WORKERS_PREFIX)
        if name.startswith(WORKERS_PREFIX) and number.isdigit():
            counts[int(number)] = name
    return counts


def _beats(comparison: Comparison, names: dict[int, str], faster: int, than: int) -> Ratio | None:
    """The ratio of ``faster`` over ``than`` if it is measurably faster (interval above 1)."""
    ratio = comparison.ratio(names[faster], baseline=names[than])
    return ratio if ratio.faster else None


def best_worker_count(comparison: Comparison, limit: int) -> int:
    """The exercise's answer: the smallest count up to ``limit`` that none up to it beats.

    "Beats" is the one timing method's: measurably faster, the ratio's interval above 1.
    Counts above ``limit`` (the CPUs this kernel may use, less one for the training process)
    are never the answer: their workers take the CPU the training loop needs.

    Raises:
        ValueError: no count up to ``limit`` was measured.
    """
    names = measured_counts(comparison)
    allowed = sorted(w for w in names if w <= limit)
    if not allowed:
        raise ValueError(f"no worker count up to {limit} was measured")
    for w in allowed:
        if not any(_beats(comparison, names, v, w) for v in allowed if v != w):
            return w
    # Intervals can in principle disagree in a circle; the fastest median then decides.
    return min(allowed, key=lambda w: comparison[names[w]].median_s)


def check_worker_choice(comparison: object, chosen: object, *, limit: int) -> Feedback:
    """Exercise 4.1: ``chosen`` is :func:`best_worker_count` of the student's comparison.

    ``comparison`` is what ``compare_workers([...])`` returned (the one timing method: per-step
    times in interleaved rounds, each ratio with its interval); ``limit`` is the CPUs this kernel
    may use less one (and no more than ``/dev/shm`` holds). The measurements must support the
    choice: 0 and ``chosen`` among at least three counts, and a larger count up to ``limit``
    measured unless ``chosen`` is ``limit`` itself.
    """
    if not isinstance(comparison, Comparison):
        return check(False, "", "my_comparison must be what compare_workers([...]) returned")
    names = measured_counts(comparison)
    if len(names) < 3 or 0 not in names:
        return check(False, "", "compare at least three worker counts, 0 among them")
    if isinstance(chosen, bool) or not isinstance(chosen, int) or chosen not in names:
        return check(False, "", f"{chosen!r} is not among the counts you compared")
    if chosen > limit:
        return check(
            False,
            "",
            f"{chosen} workers is more than this kernel's CPUs less one for the training process "
            f"({limit}): past that, the workers take turns with the training loop on its CPUs. "
            f"Pick among the counts up to {limit}",
        )
    if chosen < limit and not any(chosen < w <= limit for w in names):
        return check(
            False,
            "",
            f"{chosen} is the largest count up to {limit} you compared, so nothing shows that more "
            f"workers would not be faster: compare a larger count too (up to {limit})",
        )
    right = best_worker_count(comparison, limit)
    allowed = sorted(w for w in names if w <= limit)
    if chosen != right:
        if chosen > right:
            ratio = comparison.ratio(names[chosen], baseline=names[right])
            hint = (
                f"{chosen} workers against {right}: {ratio.describe()}. Not measurably faster: "
                f"take the smallest count that no other count up to {limit} beats"
            )
        else:
            beaten_by = next(v for v in allowed if _beats(comparison, names, v, chosen))
            ratio = comparison.ratio(names[beaten_by], baseline=names[chosen])
            hint = (
                f"{beaten_by} workers against {chosen}: {ratio.describe()}. A count that another "
                "beats (its interval above 1) is not the answer"
            )
        return check(False, "", hint)
    larger = [w for w in allowed if w > chosen]
    if larger:
        ratio = comparison.ratio(names[max(larger)], baseline=names[chosen])
        evidence = f"{max(larger)} workers against {chosen}: {ratio.describe()}"
    else:
        evidence = f"{limit} is the most workers this kernel's CPUs allow"
    smaller = [w for w in allowed if w < chosen]
    if smaller:
        beat = comparison.ratio(names[chosen], baseline=names[max(smaller)])
        evidence += f"; {chosen} against {max(smaller)}: {beat.describe()}"
    return check(True, f"{chosen} workers: {evidence}", "")
