"""Every reading of a GPU, declared once: its groups, its metrics, the charts that draw them.

This is the table nvitop's ``Device`` keeps in its methods, as data. The rest derives from it:

- the device record (``records.DeviceSample``: one value per metric, one age per group, in this
  order in the API's JSON) and its OpenAPI schema (``server/openapi.py``);
- each group's reads (``Backend.read_group``), rounds (``sampling/sampler.py``), freshness
  (``sampling/freshness.py``) and ``read_once``, which loop over ``GROUPS``;
- the long history's columns (``sampling/buckets.py``: the metrics ``long_history``);
- the Prometheus gauges (``server/metrics.py``: the metrics with a ``prometheus`` series);
- the browser's table, ``labextension/src/readings.generated.ts`` (``typescript.py`` writes it;
  a test fails while it is stale), so that the browser uses these field names too.

To add a reading, ``docs/architecture.md`` ("A reading") has the recipe. Module-level names are
read when used, never copied at import, so that a test can declare one more (``layout()``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["int", "float"]
"""A metric's JSON type: a count of bytes or a clock is an integer, the rest are numbers."""
UNITS = ("pct", "bytes_per_s", "bytes", "mhz", "w", "c")
"""The units a metric's field name may end in (``_pct``...), longest suffix first."""
MIB = 1024 * 1024


@dataclass(frozen=True)
class Group:
    """Readings of a GPU read together, by one call or a few, on a cadence of their own.

    Attributes:
        name: its name in the API (``stale`` lists stale groups by it).
        age_field: the device record's field with the group's age (seconds from its read to
            the sample's ``ts``).
        interval_option: the option (``jupyter_gpu/options.py``) that sets its cadence.
        enabled_by: the boolean option that turns it on (``None``: always on).
        age_help: the age field's description in the API.
        tick: read by the sampler's tick itself (the fast group): its read also lists the
            GPU's processes and says whether the GPU answers (``state``). Exactly one group.
        windowed: its first read of a GPU only opens a window (counters to compare): the
            values come from the next read (``read_once`` reads it twice).
        slow: ``read_once`` reads it only when asked for slow readings (a call takes ms).
        thread: the name of the thread that times its rounds (its workers:
            ``<thread>-read-<gpu>``); the tick group has none.
        what: what its calls are, for the log of a GPU that stops answering.
        card_help: what its line on a GPU's card means (the line's tooltip).
    """

    name: str
    age_field: str
    interval_option: str
    enabled_by: str | None
    age_help: str
    tick: bool = False
    windowed: bool = False
    slow: bool = False
    thread: str = ""
    what: str = "an NVML call"
    card_help: str = ""


@dataclass(frozen=True)
class Prometheus:
    """A metric's Prometheus series: ``(value - less) / divide_by``, under a DCGM name.

    ``less`` names another metric of the same device (free memory is total less used).
    """

    name: str
    help: str
    divide_by: float = 1.0
    less: str | None = None

    def convert(self, value: float | None, less: float | None = None) -> float | None:
        """The series' value for a reading of ``value`` (``less``: the value ``less`` names).

        ``None`` (left out of the series) where a value it needs is missing.
        """
        if value is None or (self.less is not None and less is None):
            return None
        if less is not None:
            value = value - less
        return float(value) if self.divide_by == 1.0 else value / self.divide_by


@dataclass(frozen=True)
class Metric:
    """One reading of a GPU.

    Attributes:
        field: its one name, on the server and in the browser, ending in its unit (``_pct``,
            ``_bytes``, ``_bytes_per_s``, ``_w``, ``_c``, ``_mhz``).
        group: the group that reads it.
        kind: ``int`` or ``float`` in the JSON.
        help: its description in the API (empty: the name says it all).
        prometheus: its Prometheus series (``None``: none).
        long_history: kept in the long history's min/mean/max buckets (``GET history``'s
            columns), which the dashboard's 1 h and 24 h ranges draw.
        chart: the dashboard chart that draws it (``CHARTS``); a charted metric is kept in the
            browser's buffer too. ``None``: not charted.
        label: its name in a chart's legend and the dashboard's hover line.
        card_label: its name on its group's line of a GPU's card (``None``: not on it; the
            tick group's readings have cards of their own).
        capacity: what the GPU has rather than does (its memory total): kept while its group
            is stale, as the scale of the charts.
    """

    field: str
    group: str
    kind: Kind = "float"
    help: str = ""
    prometheus: Prometheus | None = None
    long_history: bool = False
    chart: str | None = None
    label: str = ""
    card_label: str | None = None
    capacity: bool = False

    @property
    def unit(self) -> str:
        """The unit its name ends in (``pct``, ``bytes_per_s``...).

        Raises:
            ValueError: a name without one of ``UNITS``.
        """
        for unit in UNITS:
            if self.field.endswith(f"_{unit}"):
                return unit
        raise ValueError(f"metric {self.field!r} has no unit in its name (one of {UNITS})")


@dataclass(frozen=True)
class Chart:
    """A chart of a GPU's row on the dashboard (and a tile of its card, for the tick group's)."""

    id: str
    title: str


# The order of GROUPS is the order of the age fields and of ``stale`` in the API, and of the
# Prometheus gauges (group by group).
GROUPS: tuple[Group, ...] = (
    Group(
        "fast",
        age_field="read_age_s",
        interval_option="interval_s",
        enabled_by=None,
        tick=True,
        age_help=(
            "Seconds from when this GPU's fast readings (util, memory, power, temperature, "
            "clocks, processes) were read to this sample's ts; null if they never were."
        ),
    ),
    Group(
        "gpm",
        age_field="gpm_age_s",
        interval_option="gpm_interval_s",
        enabled_by="gpm_metrics",
        windowed=True,
        thread="jupyter-gpu-gpm",
        what="an NVML GPM call",
        age_help=(
            "The same for the GPM fields (sm_active_pct, sm_occupancy_pct, tensor_active_pct, "
            "dram_bw_pct); null when there is no GPM reading (gpm_metrics off, a GPU without "
            "GPM, the first window not ended)."
        ),
        card_help=(
            "NVML GPM (Hopper and newer): the share of SMs busy, of time on tensor cores, and "
            "of DRAM bandwidth. Utilization only says that a kernel ran."
        ),
    ),
    Group(
        "pcie",
        age_field="pcie_age_s",
        interval_option="slow_interval_s",
        enabled_by="slow_metrics",
        slow=True,
        thread="jupyter-gpu-slow",
        what="an NVML PCIe throughput call",
        age_help=(
            "The same for pcie_tx_bytes_per_s and pcie_rx_bytes_per_s; null when there is no "
            "PCIe reading (slow_metrics off, or none yet)."
        ),
    ),
    Group(
        "nvlink",
        age_field="nvlink_age_s",
        interval_option="nvlink_interval_s",
        enabled_by="nvlink_metrics",
        windowed=True,
        thread="jupyter-gpu-nvlink",
        what="an NVML NVLink call",
        age_help=(
            "The same for nvlink_tx_bytes_per_s and nvlink_rx_bytes_per_s; null when there is "
            "no NVLink reading (nvlink_metrics off, a GPU without NVLink, the first window not "
            "ended)."
        ),
        card_help=(
            "NVLink data throughput (NVML field values, all links summed): what this GPU sent "
            "to and received from its peers over NVLink, per second, protocol overhead excluded."
        ),
    ),
)

# The order of METRICS is the order of the fields in the API's JSON (kept as it was before this
# catalog, so that no response changed: PCIe before GPM).
METRICS: tuple[Metric, ...] = (
    Metric(
        "util_pct",
        "fast",
        prometheus=Prometheus("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
        long_history=True,
        chart="util",
        label="Util",
    ),
    Metric(
        "mem_util_pct",
        "fast",
        prometheus=Prometheus("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %)."),
    ),
    Metric(
        "mem_used_bytes",
        "fast",
        kind="int",
        prometheus=Prometheus(
            "DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", divide_by=MIB
        ),
        long_history=True,
        chart="mem",
        label="Mem",
    ),
    Metric(
        "mem_total_bytes",
        "fast",
        kind="int",
        prometheus=Prometheus(
            "DCGM_FI_DEV_FB_FREE",
            "Framebuffer memory free (in MiB).",
            divide_by=MIB,
            less="mem_used_bytes",
        ),
        capacity=True,
    ),
    Metric(
        "power_w",
        "fast",
        prometheus=Prometheus("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."),
        long_history=True,
        chart="power",
        label="Power",
    ),
    Metric(
        "power_limit_w",
        "fast",
        prometheus=Prometheus("DCGM_FI_DEV_POWER_MGMT_LIMIT", "Enforced power limit (in W)."),
    ),
    Metric(
        "temperature_c",
        "fast",
        prometheus=Prometheus("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)."),
        long_history=True,
        chart="temp",
        label="Temp",
    ),
    Metric(
        "sm_clock_mhz",
        "fast",
        kind="int",
        prometheus=Prometheus("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz)."),
    ),
    Metric(
        "pcie_tx_bytes_per_s",
        "pcie",
        prometheus=Prometheus(
            "DCGM_FI_PROF_PCIE_TX_BYTES",
            "PCIe transmitted bytes per second (slow metric, when enabled).",
        ),
    ),
    Metric(
        "pcie_rx_bytes_per_s",
        "pcie",
        prometheus=Prometheus(
            "DCGM_FI_PROF_PCIE_RX_BYTES",
            "PCIe received bytes per second (slow metric, when enabled).",
        ),
    ),
    # GPM: DCGM's profiling fields are ratios (0 to 1), ours percentages.
    Metric(
        "sm_active_pct",
        "gpm",
        help=(
            "NVML GPM (Hopper and newer): share of SMs busy, averaged over the last GPM window "
            '(gpm_interval_s). Null with unavailable "Not Supported" on older GPUs, and null '
            "before the first window ends."
        ),
        prometheus=Prometheus(
            "DCGM_FI_PROF_SM_ACTIVE",
            "Ratio of cycles an SM has at least one warp assigned (GPM).",
            divide_by=100.0,
        ),
        long_history=True,
        chart="util",
        label="SM active",
        card_label="SM active",
    ),
    Metric(
        "sm_occupancy_pct",
        "gpm",
        help="NVML GPM: resident warps as a share of the SMs' maximum.",
        prometheus=Prometheus(
            "DCGM_FI_PROF_SM_OCCUPANCY",
            "Ratio of warps resident on an SM to its maximum (GPM).",
            divide_by=100.0,
        ),
        long_history=True,
        chart="util",
        label="SM occupancy",
    ),
    Metric(
        "tensor_active_pct",
        "gpm",
        help="NVML GPM: share of time the SMs ran any tensor-core instruction.",
        prometheus=Prometheus(
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
            "Ratio of cycles any tensor pipe is active (GPM).",
            divide_by=100.0,
        ),
        long_history=True,
        chart="util",
        label="Tensor active",
        card_label="tensor",
    ),
    Metric(
        "dram_bw_pct",
        "gpm",
        help="NVML GPM: DRAM bandwidth used, as a share of the peak.",
        prometheus=Prometheus(
            "DCGM_FI_PROF_DRAM_ACTIVE",
            "Ratio of cycles the device memory interface is active (GPM).",
            divide_by=100.0,
        ),
        long_history=True,
        chart="util",
        label="DRAM bw",
        card_label="DRAM",
    ),
    Metric(
        "nvlink_tx_bytes_per_s",
        "nvlink",
        help=(
            "NVLink data sent per second, all links summed, over the last NVLink window "
            "(nvlink_interval_s), protocol overhead excluded "
            '(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX). Null with unavailable "no NVLink on this '
            'GPU" where it has no active link.'
        ),
        prometheus=Prometheus(
            "DCGM_FI_PROF_NVLINK_TX_BYTES",
            "NVLink transmitted data bytes per second (when enabled).",
        ),
        long_history=True,
        chart="nvlink",
        label="NVLink tx",
        card_label="NVLink tx",
    ),
    Metric(
        "nvlink_rx_bytes_per_s",
        "nvlink",
        help="The same for the data received (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX).",
        prometheus=Prometheus(
            "DCGM_FI_PROF_NVLINK_RX_BYTES",
            "NVLink received data bytes per second (when enabled).",
        ),
        long_history=True,
        chart="nvlink",
        label="NVLink rx",
        card_label="rx",
    ),
)

# The order of CHARTS is the order of a dashboard row's charts.
CHARTS: tuple[Chart, ...] = (
    Chart("util", "Utilization (%)"),
    Chart("mem", "Memory used"),
    Chart("power", "Power (W)"),
    Chart("temp", "Temperature (°C)"),
    Chart("nvlink", "NVLink (bytes/s)"),
)


@dataclass(frozen=True, eq=False)  # one per declaration: compared, and hashed, by identity
class Layout:
    """The catalog as the records read it: each metric's and each group's place.

    A ``DeviceSample`` keeps its values in ``metrics`` order and its ages in ``groups`` order,
    and keeps the layout it was made with, so that it reads the same under a later one.
    """

    groups: tuple[Group, ...]
    metrics: tuple[Metric, ...]
    charts: tuple[Chart, ...]
    metric_index: Mapping[str, int] = field(init=False)
    """Metric field -> its place in ``metrics``."""
    age_index: Mapping[str, int] = field(init=False)
    """Age field -> its group's place in ``groups``."""
    group_metrics: Mapping[str, tuple[Metric, ...]] = field(init=False)
    """Group name -> its metrics, in ``metrics`` order."""

    def __post_init__(self) -> None:
        metric_index = {m.field: i for i, m in enumerate(self.metrics)}
        age_index = {g.age_field: i for i, g in enumerate(self.groups)}
        grouped = {g.name: tuple(m for m in self.metrics if m.group == g.name) for g in self.groups}
        object.__setattr__(self, "metric_index", metric_index)
        object.__setattr__(self, "age_index", age_index)
        object.__setattr__(self, "group_metrics", grouped)

    def __deepcopy__(self, memo: dict[int, Any]) -> Layout:
        """Itself: it never changes (a deep copy of a record shares it)."""
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        """Unpickled as the catalog's layout where it is unpickled (``layout()``)."""
        return (layout, ())

    @property
    def tick_group(self) -> Group:
        """The group the tick reads itself (``fast``)."""
        return next(g for g in self.groups if g.tick)

    def group(self, name: str) -> Group:
        """The group called ``name``.

        Raises:
            KeyError: no such group.
        """
        for group in self.groups:
            if group.name == name:
                return group
        raise KeyError(f"no reading group {name!r} (the groups: {self.group_names})")

    @property
    def group_names(self) -> tuple[str, ...]:
        """The groups' names, in order."""
        return tuple(g.name for g in self.groups)


_made: list[Layout] = []
"""The layout of the declarations as last read (a race makes it twice, the same)."""


def layout() -> Layout:
    """The catalog as declared now (made again when ``GROUPS``, ``METRICS`` or ``CHARTS`` is).

    Raises:
        ValueError: declarations that do not hold together (``check``).
    """
    made = _made[0] if _made else None
    if (
        made is not None
        and made.groups is GROUPS
        and made.metrics is METRICS
        and made.charts is CHARTS
    ):
        return made
    made = Layout(GROUPS, METRICS, CHARTS)
    check(made)
    _made[:] = [made]
    return made


def check(made: Layout) -> None:
    """The declarations hold together.

    Raises:
        ValueError: a name declared twice, a metric of no group or without a unit, a chart
            that is not declared, a charted metric the long history does not keep (the
            dashboard's long ranges draw it from there), or not exactly one tick group.
    """
    names = [g.name for g in made.groups]
    fields = [m.field for m in made.metrics] + [g.age_field for g in made.groups]
    for what, seen in (("group", names), ("field", fields)):
        twice = sorted({n for n in seen if seen.count(n) > 1})
        if twice:
            raise ValueError(f"reading {what}s declared twice: {twice}")
    if sum(g.tick for g in made.groups) != 1:
        raise ValueError("exactly one reading group is read by the tick (tick=True)")
    charts = {c.id for c in made.charts}
    for m in made.metrics:
        if m.group not in names:
            raise ValueError(f"metric {m.field!r} is in no declared group ({m.group!r})")
        _ = m.unit
        if m.chart is not None and m.chart not in charts:
            raise ValueError(f"metric {m.field!r} is drawn on an undeclared chart {m.chart!r}")
        if m.chart is not None and not m.long_history:
            raise ValueError(f"metric {m.field!r} is charted but not in the long history")
