"""``SamplerOptions``: how the sampler runs, one field per option of ``jupyter_gpu/options.py``."""

from __future__ import annotations

import math
from dataclasses import dataclass

from jupyter_gpu.simulated.faults import SimulatedFault


@dataclass(frozen=True)
class SamplerOptions:
    """How the sampler runs: one field per option of ``jupyter_gpu/options.py`` that it takes.

    The server fills it from ``JupyterGpu``'s traits (``options.sampler_values``); the names are
    the options' own, and ``tests/unit/test_options.py`` checks fields and defaults against the
    declarations.

    Attributes:
        backend: ``auto``, ``nvml``, ``simulated`` or ``none``.
        interval_s: seconds between ticks (at least 0.01; the server's traits allow 0.1 and up,
            the soak benchmark runs at 0.05).
        history_s: seconds of history to keep (the ring buffer holds history_s / interval_s).
        slow_metrics: whether to read PCIe throughput at all.
        slow_interval_s: seconds between slow reads.
        cache_scan_interval_s: seconds between compile-cache scans.
        simulated_devices: devices of the simulated backend.
        simulated_faults: faults the simulated backend shows (ignored by the others).
        gpm_metrics: whether to read SM/tensor/DRAM activity (NVML GPM, Hopper and newer).
        gpm_interval_s: seconds between GPM reads (each value averages one such window).
        nvlink_metrics: whether to read NVLink data throughput (NVML field values).
        nvlink_interval_s: seconds between NVLink reads (each value averages one window).
        cache_min_free_pct: a cache's filesystem with less free than this is low on space.
        idle_holder_minutes: a kernel idle longer than this, holding more than
            ``idle_holder_gib`` of GPU memory, is an idle holder (``attribution.IdlePolicy``).
        idle_holder_gib: see ``idle_holder_minutes``.
        read_deadline_s: a device read that has not returned after this long makes the device
            "not responding" (``deadline.py``).
        long_history_s: seconds of min/mean/max buckets to keep (``buckets.Buckets``).
        history_bucket_s: the width of those buckets in seconds.
        simulated_seed_history_s: with the simulated backend only, fill this many seconds of
            synthetic past (buckets and full-resolution history) at start-up, for demos and browser
            tests of long ranges; 0 (the default) seeds nothing.
        show_other_processes: list other users' GPU processes with pid and name (else one
            summed row per GPU: ``attribution.ProcessAnnotator``).
        own_uid_processes: count processes of this server's (non-root) unix user as its own.
    """

    backend: str = "auto"
    interval_s: float = 1.0
    history_s: float = 600.0
    slow_metrics: bool = False
    slow_interval_s: float = 5.0
    cache_scan_interval_s: float = 30.0
    simulated_devices: int = 2
    simulated_faults: tuple[SimulatedFault, ...] = ()
    gpm_metrics: bool = True
    gpm_interval_s: float = 1.0
    nvlink_metrics: bool = False
    nvlink_interval_s: float = 1.0
    cache_min_free_pct: float = 10.0
    idle_holder_minutes: float = 15.0
    idle_holder_gib: float = 1.0
    read_deadline_s: float = 2.0
    long_history_s: float = 86_400.0
    history_bucket_s: float = 10.0
    simulated_seed_history_s: float = 0.0
    show_other_processes: bool = False
    own_uid_processes: bool = True

    @property
    def idle_holder_s(self) -> float:
        """``idle_holder_minutes`` in seconds."""
        return self.idle_holder_minutes * 60.0

    @property
    def idle_holder_bytes(self) -> int:
        """``idle_holder_gib`` in bytes."""
        return int(self.idle_holder_gib * 1024**3)

    @property
    def history_capacity(self) -> int:
        """Samples the ring buffer keeps."""
        return max(1, math.ceil(self.history_s / self.interval_s))
