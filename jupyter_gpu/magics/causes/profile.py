"""The causes of ``%%profile`` (``profile``): where a profiled cell's time went (its hints)."""

from __future__ import annotations

from collections.abc import Callable

from jupyter_gpu.magics.output.render import fmt_pct
from jupyter_gpu.measure import fmt_seconds

from .facts import Cause, Evidence, ProfileFacts


def _idle_kind(ev: Evidence) -> str | None:
    c = ev.cell
    if c is None or not c.cuda or c.kernel_count == 0 or (c.gpu_idle_fraction or 0.0) < 0.3:
        return None
    total = sum(c.idle_s.values())
    if total <= 0:
        return None
    return max(("host", "kernels", "copies", "other"), key=lambda k: c.idle_s.get(k, 0.0))


def _steps(c: ProfileFacts) -> str:
    """``10 steps``, or ``the measured run`` for one (a cell that loops is one run)."""
    return f"{c.steps} steps" if c.steps > 1 else "the measured run"


def _idle_share(ev: Evidence, kind: str) -> str:
    c = ev.cell
    assert c is not None
    total = sum(c.idle_s.values())
    return (
        f"GPU idle {fmt_pct(c.gpu_idle_fraction)} of {_steps(c)}, "
        f"{fmt_pct(c.idle_s[kind] / total)} of it"
    )


#: A host item (the DataLoader, the syncs) is named when it took this share of the window.
HOST_ITEM_SHARE = 0.2


def _host_item(ev: Evidence) -> str | None:
    """``loader`` or ``syncs``: the larger host share of the window, if 20 % or more.

    The two shares are measured: time in the DataLoader's ``__next__``, time blocked in syncs.
    """
    c = ev.cell
    if c is None or c.window_s <= 0:
        return None
    items = {"loader": c.loader_s, "syncs": c.sync_blocked_s if c.syncs else 0.0}
    kind, seconds = max(items.items(), key=lambda kv: kv[1])
    return kind if seconds >= HOST_ITEM_SHARE * c.window_s else None


def _share_of_window(c: ProfileFacts, seconds: float) -> str:
    return (
        f"{fmt_seconds(seconds)} of the {fmt_seconds(c.window_s)} measured "
        f"({fmt_pct(seconds / c.window_s)})"
    )


def _mean_kernel(c: ProfileFacts) -> float:
    return c.gpu_busy_s / c.kernel_count if c.gpu_busy_s and c.kernel_count else 0.0


def _mean_gap(c: ProfileFacts) -> float:
    """The GPU's idle between one queued kernel and the next, on average (measured)."""
    return c.idle_s.get("kernels", 0.0) / max(c.kernel_count - 1, 1)


def _loader(ev: Evidence) -> bool:
    """The DataLoader's share is the host's largest: with CUDA, while the GPU waits on it."""
    c = ev.cell
    if c is None or _host_item(ev) != "loader":
        return False
    return _idle_kind(ev) == "host" if c.cuda else True


def _loader_text(ev: Evidence) -> str:
    c = _cell(ev)
    head = f"{_idle_share(ev, 'host')} waiting on the host; " if c.cuda else ""
    which = c.loader_seen or "the DataLoader (none found among the notebook's names)"
    iterator = c.loader_range.split("#", 1)[-1].removesuffix(".__next__") or "its iterator"
    return (
        f"{head}the DataLoader's __next__ ({iterator}) took {_share_of_window(c, c.loader_s)}: "
        f"{which} makes the batches while the step waits for them. Try {c.loader_fix}."
    )


def _host_syncs(ev: Evidence) -> bool:
    return _idle_kind(ev) == "host" and _host_item(ev) == "syncs"


def _host_launch(ev: Evidence) -> bool:
    c = ev.cell
    return (
        _idle_kind(ev) == "host"
        and c is not None
        and _host_item(ev) is None
        and c.kernel_count >= 100
        and _mean_kernel(c) < 20e-6
    )


def _host_other(ev: Evidence) -> bool:
    return _idle_kind(ev) == "host" and _host_item(ev) is None and not _host_launch(ev)


def _host_other_text(ev: Evidence) -> str:
    c = ev.cell
    assert c is not None
    item = ""
    if c.biggest_cpu_item is not None:
        name, seconds = c.biggest_cpu_item
        item = (
            f"; on the CPU the largest item was {name[:80]} ({fmt_seconds(seconds)} of the "
            f"{fmt_seconds(c.window_s)} measured)"
        )
    return (
        f"{_idle_share(ev, 'host')} waiting on the host: the CPU queued work more slowly than "
        f"the GPU ran it{item}. The timeline shows what the CPU did in the gaps."
    )


def _no_kernel(ev: Evidence) -> bool:
    c = ev.cell
    return c is not None and c.cuda and c.kernel_count == 0 and c.window_s > 0


def _many_syncs(ev: Evidence) -> bool:
    """Blocked time in syncs is the host's largest share, the GPU idle or not."""
    c = ev.cell
    return c is not None and c.cuda and _host_item(ev) == "syncs" and not _host_syncs(ev)


def _matmul_share(ev: Evidence) -> bool:
    c = ev.cell
    return (
        c is not None
        and c.cuda
        and not c.autocast_on
        and c.gpu_total_s > 0
        and c.matmul_gpu_s > 0.4 * c.gpu_total_s
    )


def _matmul_share_text(c: ProfileFacts) -> str:
    return (
        f"Matmuls and convolutions took {fmt_pct(c.matmul_gpu_s / c.gpu_total_s)} of the GPU "
        f"time ({c.matmul_names}), with autocast off: their precision decides most of this "
        'cell\'s GPU time. %amp compare "step()" measures fp32, tf32, bf16 and fp16 on it.'
    )


def _top_cpu(ev: Evidence) -> bool:
    c = ev.cell
    return (
        c is not None
        and not c.cuda
        and c.top_cpu is not None
        and c.cpu_total_s > 0
        and c.top_cpu[1] >= 0.3 * c.cpu_total_s
    )


def _per_op(ev: Evidence) -> bool:
    c = ev.cell
    return (
        c is not None and not c.cuda and c.op_calls >= 1000 and c.cpu_total_s / c.op_calls < 10e-6
    )


def _cell(ev: Evidence) -> ProfileFacts:
    assert ev.cell is not None
    return ev.cell


PROFILE = frozenset(("profile",))


def _idle_on(kind: str, idle: str, rest: Callable[[ProfileFacts], str]) -> Cause:
    """The cause of a GPU idle mostly ``idle``: its share of the idle time, then ``rest``.

    One kind names both the trigger and the share it quotes, so the two cannot part.
    """
    return Cause(
        kind,
        PROFILE,
        lambda ev: _idle_kind(ev) == idle,
        lambda ev: f"{_idle_share(ev, idle)} {rest(_cell(ev))}",
    )


PROFILE_CAUSES: tuple[Cause, ...] = (
    # ---- %%profile: the cell's profile
    Cause(
        "no_kernel",
        PROFILE,
        _no_kernel,
        lambda ev: (
            "No GPU kernel ran in this cell: the work stayed on the CPU (check that the model "
            "and the data are on 'cuda')."
        ),
    ),
    Cause("dataloader", PROFILE, _loader, _loader_text),
    Cause(
        "host_syncs",
        PROFILE,
        _host_syncs,
        lambda ev: (
            f"{_idle_share(ev, 'host')} waiting on the host, which was blocked in syncs for "
            f"{_share_of_window(_cell(ev), _cell(ev).sync_blocked_s)}: "
            f"{_cell(ev).syncs_text}. Each sync empties the launch queue: read values back every "
            "N steps (keep losses on the GPU), and copy inputs with pin_memory=True and "
            ".to('cuda', non_blocking=True)."
        ),
    ),
    Cause(
        "launch_bound",
        PROFILE,
        _host_launch,
        lambda ev: (
            f"Launch-bound: {_idle_share(ev, 'host')} waiting on the host to launch "
            f"{_cell(ev).kernel_count:,} kernels of {fmt_seconds(_mean_kernel(_cell(ev)))} on "
            "average. Try %compile NAME --mode reduce-overhead (CUDA graphs: one launch per "
            "step), fuse work with torch.compile, or use a larger batch."
        ),
    ),
    Cause("host", PROFILE, _host_other, _host_other_text),
    _idle_on(
        "between_kernels",
        "kernels",
        lambda c: (
            f"between kernels, queued back to back ({c.kernel_count:,} kernels of "
            f"{fmt_seconds(_mean_kernel(c))} on average, "
            f"{fmt_seconds(_mean_gap(c))} idle from one to the next): the GPU waits that long "
            "at every launch. Fewer, larger kernels help: torch.compile fuses them, --mode "
            "reduce-overhead replays them as a CUDA graph."
        ),
    ),
    _idle_on(
        "copies",
        "copies",
        lambda c: (
            "on copies: the GPU moved data instead of computing. Keep tensors on the GPU "
            "between steps, use pin_memory=True in the DataLoader and "
            ".to('cuda', non_blocking=True)."
        ),
    ),
    _idle_on(
        "other_wait",
        "other",
        lambda c: (
            "with kernels queued but waiting on other work (events, other streams or copies on "
            "another stream): see the trace (--trace FILE) for what they waited on."
        ),
    ),
    Cause(
        "syncs",
        PROFILE,
        _many_syncs,
        lambda ev: (
            f"The CPU was blocked in syncs for "
            f"{_share_of_window(_cell(ev), _cell(ev).sync_blocked_s)}: "
            f"{_cell(ev).syncs_text}. Each one makes the CPU wait until the GPU has finished "
            "everything queued. Read losses every N steps (or accumulate them on the GPU) "
            "instead of calling .item()/.cpu()/print on CUDA tensors every step."
        ),
    ),
    Cause(
        "matmuls",
        PROFILE,
        _matmul_share,
        lambda ev: _matmul_share_text(_cell(ev)),
    ),
    Cause(
        "top_op",
        PROFILE,
        _top_cpu,
        lambda ev: (
            f"No GPU profiled: {(_cell(ev).top_cpu or ('', 0.0))[0]} takes "
            f"{fmt_pct((_cell(ev).top_cpu or ('', 0.0))[1] / _cell(ev).cpu_total_s)} of the CPU "
            "time in ops."
        ),
    ),
    Cause(
        "per_op",
        PROFILE,
        _per_op,
        lambda ev: (
            f"{_cell(ev).op_calls:,} op calls of "
            f"{fmt_seconds(_cell(ev).cpu_total_s / _cell(ev).op_calls)} on average: per-op "
            "overhead dominates; larger tensors per call or torch.compile would help."
        ),
    ),
)
