"""The checks of notebook 04's exercises: the top kernel (3.1) and the worker count (4.1)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

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
        return check(True, f"{top.key!r} is the {what} with the most {field} ({seconds:.4g} s)", "")
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


def check_worker_choice(
    rates: Mapping[int, float],
    chosen: object,
    *,
    limit: int,
    remeasure: Callable[[int], float],
    keep: float,
) -> Feedback:
    """Exercise 4.1: ``chosen`` must be the smallest count within 90% of the best measured.

    The measurements must support it: 0 and ``chosen`` among at least three counts, and either
    a count above ``chosen`` measured (showing that more workers no longer pay) or ``chosen`` at
    least ``limit`` (the most workers this kernel should start: its CPUs, since more processes
    than that only share them, or fewer where ``/dev/shm`` holds fewer). Then ``chosen`` is
    measured again (``remeasure``, the best of up to three tries) and must reach
    ``keep`` times the rate it was picked with.
    """
    if not isinstance(rates, Mapping) or len(rates) < 3 or 0 not in rates:
        return check(False, "", "measure at least three worker counts, 0 among them")
    if not all(isinstance(w, int) and w >= 0 for w in rates):
        return check(False, "", "the keys of my_rates are worker counts: whole numbers >= 0")
    if not all(isinstance(r, int | float) and math.isfinite(r) and r > 0 for r in rates.values()):
        return check(False, "", "the values of my_rates are measured images/s, from loader_rate")
    if chosen not in rates:
        return check(False, "", f"{chosen!r} is not among the counts you measured")
    assert isinstance(chosen, int)  # it is a key of rates
    best = max(rates.values())
    smallest = min(w for w, r in rates.items() if r >= 0.9 * best)
    if chosen != smallest:
        hint = f"{smallest} is the smallest count within 90% of your best rate ({best:,.0f})"
        return check(False, "", hint)
    if chosen < limit and not any(w > chosen for w in rates):
        return check(
            False,
            "",
            f"{chosen} is the largest count you measured, so nothing shows that more workers would "
            f"not be faster: measure a larger count too (up to {limit} makes sense here)",
        )
    again = 0.0
    for _ in range(3):  # runs vary, more on a small shared CPU: the best of three counts
        again = max(again, remeasure(chosen))
        if again >= keep * rates[chosen]:
            break
    larger = [w for w in rates if w > chosen]
    evidence = (
        f"{max(larger)} workers were at most 11% faster (1/0.9)"
        if larger
        else f"and {limit} is the most workers that make sense here"
    )
    return check(
        again >= keep * rates[chosen],
        f"{chosen} workers: {again:,.0f} images/s again (you measured {rates[chosen]:,.0f}, best "
        f"{best:,.0f}); {evidence}",
        f"{chosen} workers gave {again:,.0f} images/s this time, against your "
        f"{rates[chosen]:,.0f}: measure again with more windows",
    )
