"""The server extension's settings: one traitlets ``Configurable`` named ``JupyterGpu``.

Set them in ``jupyter_server_config.py`` (``c.JupyterGpu.interval_s = 0.5``) or on the command
line (``jupyter lab --JupyterGpu.backend=simulated``). Each option has help text and bounds; a
value out of bounds stops the extension at start-up with a message naming the option.
"""

from __future__ import annotations

import os
from typing import Any

from traitlets import Bool, Enum, Float, Int, List, TraitError, Unicode, default, validate
from traitlets.config import Configurable

from jupyter_gpu.backends.factory import BACKEND_CHOICES
from jupyter_gpu.simulated.faults import MAX_FAULTS, UNSUPPORTED_FIELDS, parse_faults

MIN_METRICS_TOKEN = 16
"""The shortest ``metrics_token`` accepted (characters)."""
MAX_HISTORY_SAMPLES = 36_000
"""Upper bound on history_s / interval_s (10 Hz for an hour): a sample of 8 GPUs with two
processes each takes about 13 KB of memory, its records and its JSON (measured by
``benchmarks/history_memory.py``; figures in benchmarks/RESULTS.md), so the full-resolution
history stays under about 480 MB."""

MAX_BUCKETS = 100_000
"""Upper bound on long_history_s / history_bucket_s (see jupyter_gpu/sampling/buckets.py)."""


class JupyterGpu(Configurable):
    """GPU monitoring for Jupyter: which backend, how often to sample, how much to keep."""

    backend = Enum(
        list(BACKEND_CHOICES),
        default_value="auto",
        help=(
            "Where GPU readings come from. 'auto': NVML if it works, else no GPU (the API says "
            "why); never simulated. 'nvml': the same, but a failure is logged as a warning. "
            "'simulated': synthetic GPUs with moving load, labelled simulated everywhere (for "
            "demos and tests). 'none': no GPU monitoring; host metrics only."
        ),
    ).tag(config=True)

    interval_s = Float(
        1.0,
        min=0.1,
        max=60.0,
        help="Seconds between samples (0.1 to 60). One sampler serves every client.",
    ).tag(config=True)

    history_s = Float(
        600.0,
        min=1.0,
        max=86_400.0,
        help=(
            "Seconds of history the server keeps, so a panel opened late shows the past "
            f"(1 to 86400; at most {MAX_HISTORY_SAMPLES:,} samples, i.e. history_s / interval_s; "
            "a sample takes about 1.6 KB of memory per GPU, see benchmarks/history_memory.py)."
        ),
    ).tag(config=True)

    slow_metrics = Bool(
        False,
        help=(
            "Also read PCIe throughput. NVML takes about 21 ms per call for it (it samples a "
            "20 ms window), so it runs in its own thread every slow_interval_s."
        ),
    ).tag(config=True)

    slow_interval_s = Float(
        5.0,
        min=1.0,
        max=3600.0,
        help="Seconds between slow reads (PCIe throughput), when slow_metrics is on (1 to 3600).",
    ).tag(config=True)

    cache_min_free_pct = Float(
        10.0,
        min=0.0,
        max=100.0,
        help=(
            "Warn (compile_cache.low_space) when the filesystem of a torch.compile cache has "
            "less than this percentage free (0 to 100)."
        ),
    ).tag(config=True)

    gpm_metrics = Bool(
        True,
        help=(
            "Read SM active, SM occupancy, tensor-core active and DRAM bandwidth from NVML's GPU "
            "Performance Monitoring (Hopper and newer; older GPUs show them as 'Not Supported'). "
            "A read (sample and metrics) took 0.5 ms per GPU idle and 3.4 ms busy on an H200, "
            "so it runs in its own thread every gpm_interval_s."
        ),
    ).tag(config=True)

    gpm_interval_s = Float(
        1.0,
        min=0.1,
        max=60.0,
        help=(
            "Seconds between GPM reads (0.1 to 60); each SM/tensor/DRAM value is the average "
            "over one such window."
        ),
    ).tag(config=True)

    cache_scan_interval_s = Float(
        30.0,
        min=1.0,
        max=86_400.0,
        help=(
            "Seconds between scans of the torch.compile caches on disk (Inductor and Triton), "
            "done in a background thread (1 to 86400)."
        ),
    ).tag(config=True)

    simulated_devices = Int(
        2,
        min=1,
        max=16,
        help="How many synthetic GPUs the 'simulated' backend shows (1 to 16).",
    ).tag(config=True)

    simulated_faults = List(
        Unicode(),
        default_value=[],
        help=(
            "Faults the 'simulated' backend shows on purpose, for demos and browser tests "
            "(ignored by the other backends; every message says 'simulated'). Each is "
            "'lost:<gpu>' (the GPU is lost, as when it falls off the bus), 'error:<gpu>' "
            "(every read fails) or 'unsupported:<gpu>:<field>' (one field reads null, "
            "'Not Supported (simulated)'), optionally followed by '@<start>' or "
            "'@<start>-<end>' in seconds after the server started (0 to 86400). Fields: "
            f"{', '.join(UNSUPPORTED_FIELDS)}. At most {MAX_FAULTS}; GPU indices below "
            "simulated_devices. Example: --JupyterGpu.simulated_faults=lost:1@10 "
            "--JupyterGpu.simulated_faults=unsupported:0:power_w"
        ),
    ).tag(config=True)

    long_history_s = Float(
        86_400.0,
        min=60.0,
        max=604_800.0,
        help=(
            "Seconds of long history the server keeps as min/mean/max buckets of "
            "history_bucket_s, after the full-resolution history_s (60 to 604800; 24 h by "
            "default). Its memory is fixed: about 0.8 MB per GPU for 24 h at 10 s buckets."
        ),
    ).tag(config=True)

    history_bucket_s = Float(
        10.0,
        min=1.0,
        max=3600.0,
        help=(
            "Width in seconds of the long history's min/mean/max buckets (1 to 3600; at most "
            f"{MAX_BUCKETS:,} buckets, i.e. long_history_s / history_bucket_s)."
        ),
    ).tag(config=True)

    simulated_seed_history_s = Float(
        0.0,
        min=0.0,
        max=604_800.0,
        help=(
            "For demos and browser tests only, with the 'simulated' backend: fill this many "
            "seconds of synthetic past at start-up (the long history and the full-resolution "
            "history), so that 1 h and 24 h ranges show something at once. Ignored by the other "
            "backends. 0 (the default): none."
        ),
    ).tag(config=True)

    read_deadline_s = Float(
        2.0,
        min=0.1,
        max=600.0,
        help=(
            "Seconds an NVML read of a GPU may take before that GPU is shown as "
            "'not responding' (a hung driver). Every read (fast, GPM, PCIe) runs in that GPU's "
            "own worker thread: a hung one never blocks the other GPUs, the sampler or the "
            "server; the GPU answers again by itself when the call returns (0.1 to 600)."
        ),
    ).tag(config=True)

    idle_holder_minutes = Float(
        15.0,
        min=0.0,
        max=10_080.0,
        help=(
            "A kernel idle for more than this many minutes (since its last activity, as the "
            "kernel manager records it) while holding more than idle_holder_gib of GPU memory "
            "is flagged as an idle holder (0 to 10080)."
        ),
    ).tag(config=True)

    idle_holder_gib = Float(
        1.0,
        min=0.0,
        max=100_000.0,
        help=(
            "GiB of GPU memory (all of a kernel's processes, on every GPU) above which an idle "
            "kernel is flagged as an idle holder (0 to 100000)."
        ),
    ).tag(config=True)

    kernel_map_interval_s = Float(
        3.0,
        min=0.5,
        max=300.0,
        help=(
            "Seconds between refreshes of which kernel (and notebook) has which process id, "
            "used to say which notebook holds which GPU memory (0.5 to 300)."
        ),
    ).tag(config=True)

    show_other_processes = Bool(
        False,
        help=(
            "Show other users' GPU processes with their pid and process name. Off (the "
            "default): a process that does not run under this server (its kernels, terminals "
            "and what they start) nor as its unix user shows only as 'other processes' with "
            "their GPU and memory, never a pid, name or command line. Turn it on only where "
            "every user of the node may see what the others run (an admin's own server)."
        ),
    ).tag(config=True)

    own_uid_processes = Bool(
        True,
        help=(
            "Count GPU processes of this server's unix user as its own (e.g. a script started "
            "over SSH), besides those under the server. Ignored when the server runs as root. "
            "Turn it off where several users' servers share one uid and one pid namespace "
            "(containers that all run as the same user with the host's pid namespace)."
        ),
    ).tag(config=True)

    metrics_token = Unicode(
        "",
        help=(
            "A token for Prometheus alone: a request to the metrics route with "
            "'Authorization: Bearer <token>' is served without a Jupyter login (and without "
            "asking JupyterHub), compared in constant time. It opens that one read-only route, "
            "nothing else; without it, or with another token, the route needs Jupyter's "
            f"authentication as every route does. At least {MIN_METRICS_TOKEN} characters; "
            "default: the environment variable JUPYTER_GPU_METRICS_TOKEN, else none."
        ),
    ).tag(config=True)

    @default("metrics_token")
    def _metrics_token_from_env(self) -> str:
        return os.environ.get("JUPYTER_GPU_METRICS_TOKEN", "")

    @validate("metrics_token")
    def _valid_metrics_token(self, proposal: Any) -> str:
        token: str = proposal["value"]
        if token and (len(token) < MIN_METRICS_TOKEN or token != token.strip()):
            raise TraitError(
                f"JupyterGpu.metrics_token must be at least {MIN_METRICS_TOKEN} characters, "
                "without surrounding spaces (e.g. from `openssl rand -hex 32`)"
            )
        return token

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Checked once every value is loaded: per-trait validators would see the other option
        # still at its default, and so depend on the order the options were given in.
        self._check_samples(self.history_s, self.interval_s)
        if self.long_history_s / self.history_bucket_s > MAX_BUCKETS:
            raise TraitError(
                f"JupyterGpu.long_history_s / JupyterGpu.history_bucket_s must be at most "
                f"{MAX_BUCKETS:,} buckets; got {self.long_history_s:g} s / "
                f"{self.history_bucket_s:g} s. Keep less long history or use wider buckets."
            )
        self._check_fault_devices()

    @validate("simulated_faults")
    def _valid_faults(self, proposal: Any) -> list[str]:
        specs: list[str] = list(proposal["value"])
        try:
            parse_faults(specs)
        except ValueError as err:
            raise TraitError(f"JupyterGpu.simulated_faults: {err}") from None
        return specs

    def _check_fault_devices(self) -> None:
        for fault in parse_faults(self.simulated_faults):
            if fault.gpu >= self.simulated_devices:
                raise TraitError(
                    f"JupyterGpu.simulated_faults: {fault.spec!r} is on GPU {fault.gpu}, but "
                    f"JupyterGpu.simulated_devices is {self.simulated_devices} (GPUs 0 to "
                    f"{self.simulated_devices - 1})"
                )

    @staticmethod
    def _check_samples(history_s: float, interval_s: float) -> None:
        if history_s / interval_s > MAX_HISTORY_SAMPLES:
            raise TraitError(
                f"JupyterGpu.history_s / JupyterGpu.interval_s must be at most "
                f"{MAX_HISTORY_SAMPLES:,} samples; got {history_s:g} s / {interval_s:g} s = "
                f"{history_s / interval_s:,.0f}. Keep less history or sample less often."
            )
