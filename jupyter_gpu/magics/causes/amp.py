"""The causes of ``%amp compare`` (``amp``): why reduced precision was no faster.

Each reads one profiled step per mode (``Evidence.modes``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from jupyter_gpu.magics.output.render import fmt_pct
from jupyter_gpu.magics.probes.evidence import CallProfile
from jupyter_gpu.measure import fmt_seconds

from .facts import CASTS_SHARE, FEW_MATMULS_SHARE, OVERHEAD_SHARE, Cause, Evidence


def _amp_pair(ev: Evidence) -> tuple[str, str] | None:
    """(reduced mode, reference mode): the faster of bf16/fp16 and of fp32/tf32."""
    timed = {m: f.time_s for m, f in ev.modes.items() if f.time_s}
    ref = min((m for m in ("fp32", "tf32") if m in timed), key=timed.__getitem__, default=None)
    red = min((m for m in ("bf16", "fp16") if m in timed), key=timed.__getitem__, default=None)
    return None if ref is None or red is None else (red, ref)


class _Profiles(NamedTuple):
    """The two modes compared (reduced, reference) and a profiled step of each."""

    red: str
    ref: str
    p_red: CallProfile
    p_ref: CallProfile


def _amp_profiles(ev: Evidence) -> _Profiles | None:
    pair = _amp_pair(ev)
    if pair is None:
        return None
    red, ref = pair
    p_red, p_ref = ev.modes[red].profile, ev.modes[ref].profile
    if p_red is None or p_ref is None:
        return None
    return _Profiles(red, ref, p_red, p_ref)


def _profiles(ev: Evidence) -> _Profiles:
    """The profiles a sentence quotes (its trigger fired, so both were taken)."""
    found = _amp_profiles(ev)
    assert found is not None
    return found


def _if_profiled(test: Callable[[Evidence, _Profiles], bool]) -> Callable[[Evidence], bool]:
    """A trigger: ``test`` over both modes' profiles; quiet when either was not taken."""

    def trigger(ev: Evidence) -> bool:
        found = _amp_profiles(ev)
        return found is not None and test(ev, found)

    return trigger


def _amp_overhead(ev: Evidence, f: _Profiles) -> bool:
    p = f.p_red
    return bool(p.cuda and p.gpu_busy_s is not None) and (
        (p.gpu_busy_s or 0.0) < OVERHEAD_SHARE * ev.modes[f.red].time_s
    )


def _amp_overhead_text(ev: Evidence) -> str:
    red, _, p, _ = _profiles(ev)
    return (
        f"In {red} the GPU was busy {fmt_seconds(p.gpu_busy_s)} of the "
        f"{fmt_seconds(ev.modes[red].time_s)} a step takes ({p.kernels or 0:.0f} kernels a "
        "step): the rest is the CPU preparing and launching work, which precision does not "
        "shorten. Larger batches or layers put more of the step on the GPU."
    )


def _few_matmuls(ev: Evidence, f: _Profiles) -> bool:
    p = f.p_ref
    return p.busy_s > 0 and p.matmul_s() < FEW_MATMULS_SHARE * p.busy_s


def _few_matmuls_text(ev: Evidence) -> str:
    _, ref, _, p = _profiles(ev)
    busy = "the GPU's busy time" if p.cuda else "the time in ops"
    return (
        f"Matmuls and convolutions took {fmt_pct(p.matmul_s() / p.busy_s)} of {busy} in "
        f"{ref} ({fmt_seconds(p.matmul_s())} of {fmt_seconds(p.busy_s)} a step): reduced "
        "precision speeds those up, not the rest of the step (elementwise ops, reductions)."
    )


def _slow_matmuls(ev: Evidence, f: _Profiles) -> bool:
    return f.p_red.matmul_s() > 0 and f.p_red.matmul_s() >= f.p_ref.matmul_s() > 0


def _slow_matmuls_text(ev: Evidence) -> str:
    red, ref, p_red, p_ref = _profiles(ev)
    where = "this GPU" if p_red.cuda else "this CPU"
    return (
        f"The {red} matmuls and convolutions took {fmt_seconds(p_red.matmul_s())} a step "
        f"against {fmt_seconds(p_ref.matmul_s())} in {ref}: on {where} they ran no faster "
        f"({p_red.matmul_names()})."
    )


def _casts(ev: Evidence, f: _Profiles) -> bool:
    p = f.p_red
    return p.busy_s > 0 and p.casts_s >= CASTS_SHARE * p.busy_s


def _casts_text(ev: Evidence) -> str:
    red, _, p, _ = _profiles(ev)
    return (
        f"Autocast's casts (aten::_to_copy) took {fmt_seconds(p.casts_s)} of the "
        f"{fmt_seconds(p.busy_s)} of work a step in {red} ({fmt_pct(p.casts_s / p.busy_s)}): "
        "each step casts the weights it uses, which costs most where the matmuls are small."
    )


def no_cause_amp(ev: Evidence) -> str:
    """The "no cause found" line of ``%amp compare``, with its figures."""
    pair = _amp_pair(ev)
    if pair is None:
        return "no cause found: the modes to compare did not all run."
    red, ref = pair
    figures = (
        f"{red} {fmt_seconds(ev.modes[red].time_s)} against {ref} "
        f"{fmt_seconds(ev.modes[ref].time_s)} a step"
    )
    found = _amp_profiles(ev)
    if found is not None:
        _, _, p_red, p_ref = found
        figures += (
            f"; matmuls and convolutions {fmt_seconds(p_ref.matmul_s())} a step in {ref}, "
            f"{fmt_seconds(p_red.matmul_s())} in {red}"
        )
    return f"no cause found: {figures}."


AMP = frozenset(("amp",))

AMP_CAUSES: tuple[Cause, ...] = (
    # ---- %amp compare: a profile of one step per mode
    Cause("launch_bound", AMP, _if_profiled(_amp_overhead), _amp_overhead_text),
    Cause("slow_matmuls", AMP, _if_profiled(_slow_matmuls), _slow_matmuls_text),
    Cause("few_matmuls", AMP, _if_profiled(_few_matmuls), _few_matmuls_text),
    Cause("casts", AMP, _if_profiled(_casts), _casts_text),
)
