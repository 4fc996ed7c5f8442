"""The step as it is, measured: the first thing ``%tune`` does, inside its repeated runs.

In order: two warm-up steps (first-call costs: cuBLAS handles, the allocator growing); the first
two steps from the saved state (the losses every fix is compared with, the first step's peak);
the steady time per step (``compare`` with one variant: its rounds give the interval); a
profile of steady steps (``%%profile``'s schedule and analysis, so the idle window, the split
and the DataLoader's share mean what they mean there); on CUDA, where the profile counted
syncs, one more step in CUDA's sync-debug mode to find their lines (never while timed); one
profiled step with its matmuls' dtypes; one step under torch's FLOP counter.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from jupyter_gpu.host.cpus import read_cpu_budget
from jupyter_gpu.magics.probes.evidence import profile_one_call
from jupyter_gpu.magics.probes.precision import autocast_enabled, tf32_enabled, tf32_supported
from jupyter_gpu.magics.profile.analysis import analyse
from jupyter_gpu.magics.profile.steps import UnreadableTrace, profiled_pass, step_profiler
from jupyter_gpu.magics.profile.syncs import SyncSpy
from jupyter_gpu.magics.shell.cell import cell_filenames
from jupyter_gpu.measure import compare, synchronize

from .evidence import Evidence, count_flops

if TYPE_CHECKING:
    from .fixes import TuneSession

#: About how long the profiled steady steps last (seconds), between 2 and 10 steps.
PROFILE_S = 0.3
_DTYPE_NAMES = {"bfloat16": "bf16", "float16": "fp16"}


def _autocast_dtype(device: str) -> str:
    import torch  # loaded already: the magic imported it

    getter = getattr(torch, "get_autocast_dtype", None)
    if getter is None:
        return ""
    return _DTYPE_NAMES.get(str(getter(device)).removeprefix("torch."), "")


def _free_bytes() -> int | None:
    """Bytes a bigger step could still use: free on the device plus torch's unused cache."""
    import torch  # loaded already: the magic imported it

    try:
        free, _total = torch.cuda.mem_get_info()
        cached = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
    except RuntimeError:
        return None
    return int(free + max(0, cached))


def measure_baseline(s: TuneSession, *, timing_s: float) -> Evidence:
    """Measure the step as it is (see the module doc). Runs inside the session's runs."""
    import torch  # loaded already: the magic imported it

    target = s.target
    device = target.device
    base = s.variant([])
    with base.entered():
        for _ in range(2):
            base.run()
    synchronize(device)
    s.reset()
    first = s.first_steps([])
    s.base_first = first
    timing = compare(
        {"as is": base},
        device=device,
        warmup=1,
        target_s=timing_s,
        on_round=s.progress.on_round,
    )["as is"]
    steps = max(2, min(10, math.ceil(PROFILE_S / max(timing.median_s, 1e-6))))
    autocast_on = autocast_enabled(device)
    ev = Evidence(
        device,
        timing,
        first,
        gpu_name=torch.cuda.get_device_name() if target.cuda else "",
        autocast_on=autocast_on,
        autocast_dtype=_autocast_dtype(device) if autocast_on else "",
        tf32=tf32_enabled(),
        tf32_hardware=tf32_supported(),
        threads=int(torch.get_num_threads()),
        cpus=read_cpu_budget(),
    )
    cell_names = cell_filenames(s.shell)
    prof = step_profiler(warmup=1, steps=steps, cuda=target.cuda)
    try:
        with base.entered():
            profiled_pass(prof, base.run, 1, steps)
    except UnreadableTrace:  # torch could not read back its trace (see %%profile): no analysis
        ev.analysis = None
    else:
        try:
            ev.analysis = analyse(
                prof,
                cuda=target.cuda,
                autocast_on=autocast_on,
                cell_names=cell_names,
                timeline=False,
            )
            ev.profiler = prof
        except UnicodeDecodeError:  # torch's own trace parse, now and then (see %%profile)
            ev.analysis = None
    if target.cuda and ev.sync_count:
        spy = SyncSpy(cell_names)
        with base.entered(), spy:
            base.run()
        synchronize(device)
        ev.sync_places = {k: v for k, v in spy.places.items() if k != "?"}
    with base.entered():
        ev.call = profile_one_call(base.run)
        ev.flops_per_step, ev.flops_note = count_flops(base.run)
    synchronize(device)
    if target.cuda:
        ev.free_bytes = _free_bytes()
    return ev
