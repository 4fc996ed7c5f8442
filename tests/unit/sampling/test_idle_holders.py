"""Idle holders: kernels idle for long while their processes hold GPU memory."""

from __future__ import annotations

import os

from jupyter_gpu.readings import DeviceSample, ProcessSample
from jupyter_gpu.sampling import freeze_kernel_map
from jupyter_gpu.sampling.attribution import IdlePolicy, KernelRef, ProcessAnnotator

GIB = 1024**3
NOW = 1_800_000_000.0


def _device(index: int, *procs: tuple[int, int]) -> DeviceSample:
    return DeviceSample(
        index,
        f"GPU-{index}",
        "Fake",
        processes=tuple(ProcessSample(pid, None, used) for pid, used in procs),
    )


def _annotator(refs: dict[int, KernelRef]) -> ProcessAnnotator:
    a = ProcessAnnotator(wall_clock=lambda: NOW, idle=IdlePolicy(15 * 60.0, GIB))
    a.kernel_map = freeze_kernel_map(refs)
    return a


def test_idle_kernel_over_the_memory_threshold_is_flagged() -> None:
    me = os.getpid()  # a real process, so the lineage lookup finds it
    a = _annotator({me: KernelRef("k1", "train.ipynb", last_activity_ts=NOW - 20 * 60)})
    (d,) = a.annotate((_device(0, (me, 2 * GIB)),))
    (p,) = d.processes
    assert p.kernel_id == "k1"
    assert p.idle_s == 1200.0
    assert p.idle_holder
    assert p.to_dict()["idle_holder"] is True


def test_recently_active_busy_small_or_foreign_are_not_holders() -> None:
    me = os.getpid()
    recent = _annotator({me: KernelRef("k", None, last_activity_ts=NOW - 60)})
    (d,) = recent.annotate((_device(0, (me, 8 * GIB)),))
    assert d.processes[0].idle_s == 60.0
    assert not d.processes[0].idle_holder

    busy = _annotator({me: KernelRef("k", None, last_activity_ts=NOW - 3600, busy=True)})
    (d,) = busy.annotate((_device(0, (me, 8 * GIB)),))
    assert d.processes[0].idle_s == 0.0  # running a cell is not idle, however long it runs
    assert not d.processes[0].idle_holder

    small = _annotator({me: KernelRef("k", None, last_activity_ts=NOW - 3600)})
    (d,) = small.annotate((_device(0, (me, GIB // 2)),))
    assert not d.processes[0].idle_holder

    foreign = _annotator({})
    (d,) = foreign.annotate((_device(0, (me, 8 * GIB)),))
    assert d.processes[0].idle_s is None
    assert not d.processes[0].idle_holder


def test_memory_counts_over_every_gpu_of_the_kernel() -> None:
    me = os.getpid()
    a = _annotator({me: KernelRef("k", None, last_activity_ts=NOW - 3600)})
    # 0.6 GiB on each of two GPUs: 1.2 GiB in all, over the 1 GiB threshold.
    d0, d1 = a.annotate((_device(0, (me, int(0.6 * GIB))), _device(1, (me, int(0.6 * GIB)))))
    assert d0.processes[0].idle_holder
    assert d1.processes[0].idle_holder


def test_last_activity_from_jupyter_server_kernel_manager() -> None:
    from datetime import datetime, timezone

    from jupyter_gpu.server.kernels import last_activity_ts

    class Km:
        last_activity = datetime(2026, 12, 1, 3, 0, tzinfo=timezone.utc)

    assert last_activity_ts(Km()) == Km.last_activity.timestamp()
    assert last_activity_ts(object()) is None
