"""Every server setting, declared once: its name, type, bounds, help, and where it shows.

The rest derives from ``OPTIONS``:

- the traits of ``JupyterGpu`` (``jupyter_gpu/config.py``: ``c.JupyterGpu.<name>``, with this
  help and these bounds);
- the sampler's options (``SamplerOptions`` has a field of the same name for each option the
  sampler takes; ``sampler_values`` fills them, ``tests/unit/test_options.py`` checks the
  fields);
- the ``config`` object of ``GET devices`` (``api_config``), in the order declared here;
- that object's schema in the served OpenAPI document (``config_schema``).

One name in every layer. ``backend`` alone shows under another key in the API,
``requested_backend``, because the devices JSON's own ``backend`` is what the server got.
To add a setting, declare it here (and give ``SamplerOptions`` its field if the sampler takes
it); ``docs/architecture.md`` says where else to look.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from jupyter_gpu.backends.factory import BACKEND_CHOICES
from jupyter_gpu.simulated.faults import MAX_FAULTS, UNSUPPORTED_FIELDS, parse_faults

MIN_METRICS_TOKEN = 16
"""The shortest ``metrics_token`` accepted (characters)."""
MAX_HISTORY_SAMPLES = 36_000
"""Upper bound on history_s / interval_s (10 Hz for an hour): a sample of 8 GPUs with two
processes each takes about 16 KB of memory, its records and its JSON (measured by
``benchmarks/history_memory.py``; figures in benchmarks/RESULTS.md), so the full-resolution
history stays under about 570 MB."""

MAX_BUCKETS = 100_000
"""Upper bound on long_history_s / history_bucket_s (see jupyter_gpu/sampling/buckets.py)."""

Kind = Literal["bool", "int", "float", "str", "str_list"]


@dataclass(frozen=True)
class Option:
    """One setting of the server extension.

    Attributes:
        name: the trait's name (``c.JupyterGpu.<name>``), the sampler's field, the API's key.
        kind: its type; ``str`` with ``choices`` is one of them.
        default: the value when it is not set.
        help: what it does, with its bounds, for ``--help-all`` and the OpenAPI schema.
        minimum: lowest value accepted (numbers), inclusive.
        maximum: highest value accepted (numbers), inclusive.
        choices: the values a ``str`` may take.
        api: it shows in ``GET devices``' ``config`` (and so in its schema).
        frontend: the JupyterLab frontend reads it there (``IServerConfig`` in
            ``labextension/src/types.ts``).
        sampler: the sampler takes it (``SamplerOptions`` has a field of this name).
        to_sampler: turns the trait's value into the sampler's (e.g. fault specs into faults).
        api_name: its key in the API where that is not ``name``.
        setting: ``False`` for a figure the server derives from the settings and reports
            beside them (no trait, no sampler field).
    """

    name: str
    kind: Kind
    default: Any
    help: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    api: bool = False
    frontend: bool = False
    sampler: bool = True
    to_sampler: Callable[[Any], Any] | None = None
    api_name: str | None = None
    setting: bool = True

    @property
    def key(self) -> str:
        """Its key in the API."""
        return self.api_name or self.name

    def schema(self) -> dict[str, Any]:
        """Its JSON Schema in the API (type, bounds, choices, help)."""
        types: dict[str, dict[str, Any]] = {
            "bool": {"type": "boolean"},
            "int": {"type": "integer"},
            "float": {"type": "number"},
            "str": {"type": "string"},
            "str_list": {"type": "array", "items": {"type": "string"}},
        }
        schema = types[self.kind]
        if self.choices:
            schema["enum"] = list(self.choices)
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        schema["description"] = self.help
        return schema


# The order is the order of ``GET devices``' config object (kept as it was before these
# declarations, so that the response did not change); the settings that do not show there follow.
OPTIONS: tuple[Option, ...] = (
    Option(
        "interval_s",
        "float",
        1.0,
        "Seconds between samples (0.1 to 60). One sampler serves every client.",
        minimum=0.1,
        maximum=60.0,
        api=True,
        frontend=True,
    ),
    Option(
        "history_s",
        "float",
        600.0,
        "Seconds of history the server keeps, so a panel opened late shows the past "
        f"(1 to 86400; at most {MAX_HISTORY_SAMPLES:,} samples, i.e. history_s / interval_s; "
        "each GPU adds about 1.8 KB to a sample's memory: benchmarks/history_memory.py, "
        "simulated backend, 2026-12-04).",
        minimum=1.0,
        maximum=86_400.0,
        api=True,
        frontend=True,
    ),
    Option(
        "slow_metrics",
        "bool",
        False,
        "Also read PCIe throughput. NVML samples a 20 ms window for it "
        "(nvmlDeviceGetPcieThroughput's documentation; a call took 21 ms on an H200, "
        "2026-11-30), so it runs in its own thread every slow_interval_s.",
        api=True,
        frontend=True,
    ),
    Option(
        "slow_interval_s",
        "float",
        5.0,
        "Seconds between slow reads (PCIe throughput), when slow_metrics is on (1 to 3600).",
        minimum=1.0,
        maximum=3600.0,
        api=True,
        frontend=True,
    ),
    Option(
        "cache_scan_interval_s",
        "float",
        30.0,
        "Seconds between scans of the torch.compile caches on disk (Inductor and Triton), "
        "done in a background thread (1 to 86400).",
        minimum=1.0,
        maximum=86_400.0,
        api=True,
        frontend=True,
    ),
    Option(
        "gpm_metrics",
        "bool",
        True,
        "Read SM active, SM occupancy, tensor-core active and DRAM bandwidth from NVML's GPU "
        "Performance Monitoring (Hopper and newer; older GPUs show them as 'Not Supported'). "
        "A read (sample and metrics) took 0.5 ms per GPU idle and 3.4 ms busy on an H200 "
        "(2026-12-01), so it runs in its own thread every gpm_interval_s.",
        api=True,
        frontend=True,
    ),
    Option(
        "gpm_interval_s",
        "float",
        1.0,
        "Seconds between GPM reads (0.1 to 60); each SM/tensor/DRAM value is the average "
        "over one such window.",
        minimum=0.1,
        maximum=60.0,
        api=True,
        frontend=True,
    ),
    Option(
        "nvlink_metrics",
        "bool",
        False,
        "Read each GPU's NVLink data throughput (bytes per second sent and received over all "
        "its links, from NVML's field values), in its own thread every nvlink_interval_s. A "
        "GPU without an active NVLink (a single PCIe GPU) shows 'no NVLink on this GPU'.",
        api=True,
    ),
    Option(
        "nvlink_interval_s",
        "float",
        1.0,
        "Seconds between NVLink reads (0.1 to 60); each value is the average over one such window.",
        minimum=0.1,
        maximum=60.0,
        api=True,
    ),
    Option(
        "cache_min_free_pct",
        "float",
        10.0,
        "Warn (compile_cache.low_space) when the filesystem of a torch.compile cache has "
        "less than this percentage free (0 to 100).",
        minimum=0.0,
        maximum=100.0,
        api=True,
    ),
    Option(
        "idle_holder_minutes",
        "float",
        15.0,
        "A kernel idle for more than this many minutes (since its last activity, as the "
        "kernel manager records it) while holding more than idle_holder_gib of GPU memory "
        "is flagged as an idle holder (0 to 10080).",
        minimum=0.0,
        maximum=10_080.0,
        api=True,
        frontend=True,
    ),
    Option(
        "idle_holder_gib",
        "float",
        1.0,
        "GiB of GPU memory (all of a kernel's processes, on every GPU) above which an idle "
        "kernel is flagged as an idle holder (0 to 100000).",
        minimum=0.0,
        maximum=100_000.0,
        api=True,
        frontend=True,
    ),
    Option(
        "backend",
        "str",
        "auto",
        "Where GPU readings come from. 'auto': NVML if it works, else no GPU (the API says "
        "why); never simulated. 'nvml': the same, but a failure is logged as a warning. "
        "'simulated': synthetic GPUs with moving load, labelled simulated everywhere (for "
        "demos and tests). 'none': no GPU monitoring; host metrics only.",
        choices=BACKEND_CHOICES,
        api=True,
        api_name="requested_backend",  # the devices JSON's `backend` is what the server got
    ),
    Option(
        "history_capacity",
        "int",
        None,
        "How many samples the ring buffer keeps (history_s / interval_s, rounded up).",
        minimum=1,
        maximum=MAX_HISTORY_SAMPLES,
        api=True,
        sampler=False,
        setting=False,
    ),
    Option(
        "read_deadline_s",
        "float",
        2.0,
        "Seconds an NVML read of a GPU may take before that GPU is shown as "
        "'not responding' (a hung driver). Every read (fast, GPM, PCIe) runs in that GPU's "
        "own worker thread: a hung one never blocks the other GPUs, the sampler or the "
        "server; the GPU answers again by itself when the call returns (0.1 to 600).",
        minimum=0.1,
        maximum=600.0,
        api=True,
    ),
    Option(
        "long_history_s",
        "float",
        86_400.0,
        "Seconds of long history the server keeps as min/mean/max buckets of "
        "history_bucket_s, after the full-resolution history_s (60 to 604800; 24 h by "
        "default). Its memory is fixed: 138 KB per reading and GPU for 24 h at 10 s buckets, "
        "about 1.1 MB per GPU with the fast and GPM readings (1.4 MB with NVLink's).",
        minimum=60.0,
        maximum=604_800.0,
        api=True,
        frontend=True,
    ),
    Option(
        "history_bucket_s",
        "float",
        10.0,
        "Width in seconds of the long history's min/mean/max buckets (1 to 3600; at most "
        f"{MAX_BUCKETS:,} buckets, i.e. long_history_s / history_bucket_s).",
        minimum=1.0,
        maximum=3600.0,
        api=True,
        frontend=True,
    ),
    Option(
        "simulated_devices",
        "int",
        2,
        "How many synthetic GPUs the 'simulated' backend shows (1 to 16).",
        minimum=1,
        maximum=16,
    ),
    Option(
        "simulated_faults",
        "str_list",
        (),
        "Faults the 'simulated' backend shows on purpose, for demos and browser tests "
        "(ignored by the other backends; every message says 'simulated'). Each is "
        "'lost:<gpu>' (the GPU is lost, as when it falls off the bus), 'error:<gpu>' "
        "(every read fails), 'hang:<gpu>' (every read blocks, as on a hung driver: the GPU "
        "turns 'not responding') or 'unsupported:<gpu>:<field>' (one field reads null, "
        "'Not Supported (simulated)'), optionally followed by '@<start>' or "
        "'@<start>-<end>' in seconds after the server started (0 to 86400); or 'hang:init' "
        "(the start-up blocks, as a hung nvmlInit does: host readings only, 'NVML has not "
        "answered for N s'), optionally '@0-<end>' (the GPUs come in at <end> s). Fields: "
        f"{', '.join(UNSUPPORTED_FIELDS)}. At most {MAX_FAULTS}; GPU indices below "
        "simulated_devices. Example: --JupyterGpu.simulated_faults=lost:1@10 "
        "--JupyterGpu.simulated_faults=unsupported:0:power_w",
        to_sampler=parse_faults,
    ),
    Option(
        "simulated_seed_history_s",
        "float",
        0.0,
        "For demos and browser tests only, with the 'simulated' backend: fill this many "
        "seconds of synthetic past at start-up (the long history and the full-resolution "
        "history), so that 1 h and 24 h ranges show something at once. Ignored by the other "
        "backends. 0 (the default): none.",
        minimum=0.0,
        maximum=604_800.0,
    ),
    Option(
        "kernel_map_interval_s",
        "float",
        3.0,
        "Seconds between refreshes of which kernel (and notebook) has which process id, "
        "used to say which notebook holds which GPU memory (0.5 to 300).",
        minimum=0.5,
        maximum=300.0,
        sampler=False,  # the server refreshes the map on its event loop
    ),
    Option(
        "max_stream_clients",
        "int",
        64,
        "How many WebSocket stream clients (browser tabs with the GPU monitor open, at one "
        "socket each) the server serves at once (1 to 10000). One more is closed at once "
        "with code 1013 and a reason the panel shows; it polls no faster for it and tries "
        "again after a minute. Each client's unsent data is bounded by "
        "stream_send_budget_kib, so the stream holds at most about this many times that.",
        minimum=1,
        maximum=10_000,
        sampler=False,  # the stream's handler reads it
    ),
    Option(
        "stream_send_budget_kib",
        "int",
        512,
        "KiB of samples a stream client may leave unread on the server (its unsent data, "
        "past what the operating system's socket buffers hold) before the server drops its "
        "connection, freeing that data (64 to 1048576). A client that reads catches up; "
        "one that stopped reading (a frozen tab, a dead link) reconnects and fills the gap "
        "from the history when it can.",
        minimum=64,
        maximum=1_048_576,
        sampler=False,  # the stream's handler reads it
    ),
    Option(
        "show_other_processes",
        "bool",
        False,
        "Show other users' GPU processes with their pid and process name. Off (the "
        "default): a process that does not run under this server (its kernels, terminals "
        "and what they start) nor as its unix user shows only as 'other processes' with "
        "their GPU and memory, never a pid, name or command line. Turn it on only where "
        "every user of the node may see what the others run (an admin's own server).",
    ),
    Option(
        "own_uid_processes",
        "bool",
        True,
        "Count GPU processes of this server's unix user as its own (e.g. a script started "
        "over SSH), besides those under the server. Ignored when the server runs as root. "
        "Turn it off where several users' servers share one uid and one pid namespace "
        "(containers that all run as the same user with the host's pid namespace).",
    ),
    Option(
        "metrics_token",
        "str",
        "",
        "A token for Prometheus alone: a request to the metrics route with "
        "'Authorization: Bearer <token>' is served without a Jupyter login (and without "
        "asking JupyterHub), compared in constant time. It opens that one read-only route, "
        "nothing else; without it, or with another token, the route needs Jupyter's "
        f"authentication as every route does. At least {MIN_METRICS_TOKEN} characters; "
        "default: the environment variable JUPYTER_GPU_METRICS_TOKEN, else none.",
        sampler=False,  # read by the metrics route's handler; never shown
    ),
)


def settings() -> tuple[Option, ...]:
    """The options that are settings (each a trait of ``JupyterGpu``)."""
    return tuple(o for o in OPTIONS if o.setting)


def sampler_values(config: Any) -> dict[str, Any]:
    """The sampler's options (``SamplerOptions(**...)``) from the settings' values."""
    values: dict[str, Any] = {}
    for option in OPTIONS:
        if option.sampler and option.setting:
            value = getattr(config, option.name)
            values[option.name] = option.to_sampler(value) if option.to_sampler else value
    return values


def api_config(config: Any, reported: Mapping[str, Any]) -> dict[str, Any]:
    """``GET devices``' ``config``: the settings it shows, and the figures in ``reported``."""
    return {
        option.key: getattr(config, option.name) if option.setting else reported[option.name]
        for option in OPTIONS
        if option.api
    }


def config_schema() -> dict[str, Any]:
    """The JSON Schema of that object: every key required, each with its type and bounds."""
    shown = [option for option in OPTIONS if option.api]
    return {
        "type": "object",
        "required": [option.key for option in shown],
        "properties": {option.key: option.schema() for option in shown},
    }
