"""``GET metrics``: the latest sample for Prometheus, rendered by ``prometheus_client``.

A custom collector reads the sampler's latest sample: the metric families of one sample are
built once (the first scrape after it) and reused by every scrape until the next sample, so N
scrapers cost one build per tick. Only the sampler's health is computed per scrape: the age of
the latest sample must grow while the sampler is stuck.

GPU series are the metrics of ``readings/catalog.py`` that declare one, group by group, in
dcgm-exporter's names, units and labels (``gpu``, ``UUID``, ``modelName``,
``Hostname``, plus ``pci_bus_id``; a MIG instance adds ``GPU_I_ID`` and ``GPU_I_PROFILE`` and,
as in dcgm-exporter, has its physical GPU's ``gpu`` and ``UUID``), so existing DCGM dashboards
work on them. Host, per-kernel and compile-cache series are ``jupyter_gpu_*``. A value that could
not be read is left out (Prometheus has no null), and so is a stale one: the sampler makes the
fields of a stale group of readings ``None`` (``sampling/freshness.py``), so a GPU whose GPM
call hangs loses its ``DCGM_FI_PROF_*`` series and keeps the others. Per-kernel memory is
labelled by notebook and user only: never a pid, so the series stay few, and end when the
kernel does.
"""

from __future__ import annotations

import getpass
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from jupyter_gpu.readings import BackendInfo, DeviceInfo, DeviceSample, Sample, catalog

if TYPE_CHECKING:
    from jupyter_gpu.sampling import Sampler

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""What ``generate_latest`` writes (Prometheus's text format 0.0.4)."""
NVML_NOT_ANSWERED_LABEL = "NVML has not answered yet (see jupyter_gpu_nvml_wait_seconds)"
"""``jupyter_gpu_info``'s ``reason`` while NVML's start-up has not returned."""
DEVICE_LABELS = ("gpu", "UUID", "modelName", "Hostname", "pci_bus_id", "GPU_I_ID", "GPU_I_PROFILE")


def _series_value(
    device: DeviceSample, metric: catalog.Metric, series: catalog.Prometheus
) -> float | None:
    """``metric``'s value on ``device`` in its Prometheus series' unit (``None``: left out)."""
    less = device.value(series.less) if series.less is not None else None
    return series.convert(device.value(metric.field), less)


def _device_gauges() -> list[tuple[catalog.Metric, catalog.Prometheus]]:
    """The metrics with a Prometheus series, group by group (``readings/catalog.py``)."""
    made = catalog.layout()
    return [
        (m, m.prometheus)
        for g in made.groups
        for m in made.group_metrics[g.name]
        if m.prometheus is not None
    ]


def server_user() -> str:
    """Whose server this is: the hub's user name, else the unix user."""
    name = os.environ.get("JUPYTERHUB_USER")
    if name:
        return name
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        return str(os.getuid())


def _device_labels(d: DeviceSample, info: BackendInfo, host: str) -> list[str]:
    """``d``'s values of ``DEVICE_LABELS`` (a MIG instance: its physical GPU's, and its own)."""
    static: DeviceInfo | None = info.devices[d.index] if d.index < len(info.devices) else None
    mig = static.mig if static is not None else None
    if mig is None:
        gpu, uuid, instance, profile = str(d.index), d.uuid or "", "", ""
    else:
        gpu, uuid = str(mig.parent_index), mig.parent_uuid or ""
        instance = str(mig.gpu_instance_id) if mig.gpu_instance_id is not None else ""
        profile = mig.profile or ""
    pci_bus_id = (static.pci_bus_id if static else None) or ""
    return [gpu, uuid, d.name or "", host, pci_bus_id, instance, profile]


def _gauge(name: str, help_text: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, labels=list(labels))


def sample_families(sample: Sample, info: BackendInfo, user: str, host: str) -> list[Metric]:
    """The metric families of one sample (what does not change until the next one)."""
    out: list[Metric] = []
    labels = {d.index: _device_labels(d, info, host) for d in sample.devices}
    for metric, series in _device_gauges():
        values = [(labels[d.index], _series_value(d, metric, series)) for d in sample.devices]
        if any(v is not None for _, v in values):
            family = _gauge(series.name, series.help, DEVICE_LABELS)
            for label_values, value in values:
                if value is not None:
                    family.add_metric(label_values, value)
            out.append(family)

    if sample.devices:
        ok = _gauge(
            "jupyter_gpu_device_ok", "1 if the GPU answers, 0 if lost or unreadable.", DEVICE_LABELS
        )
        kernels = _gauge(
            "jupyter_gpu_kernel_memory_bytes",
            "GPU memory held by this server's kernels (and what they started), by notebook "
            "(empty: a kernel without a notebook).",
            (*DEVICE_LABELS, "notebook", "user"),
        )
        scopes = _gauge(
            "jupyter_gpu_processes_memory_bytes",
            "GPU memory of processes by whose they are: server (this server's, kernels "
            "included), other (other users'), unattributable (pids not visible here).",
            (*DEVICE_LABELS, "scope"),
        )
        for d in sample.devices:
            ok.add_metric(labels[d.index], 1 if d.state == "ok" else 0)
            by_notebook: dict[str, int] = {}
            by_scope: dict[str, int] = {"server": 0, "other": 0, "unattributable": 0}
            for p in d.processes:
                used = p.used_mem_bytes or 0
                by_scope[p.scope] += used
                if p.kernel_id is not None:
                    key = p.notebook or ""
                    by_notebook[key] = by_notebook.get(key, 0) + used
            for notebook, used in sorted(by_notebook.items()):
                kernels.add_metric([*labels[d.index], notebook, user], used)
            if d.state == "ok":
                for scope, used in by_scope.items():
                    scopes.add_metric([*labels[d.index], scope], used)
        out += [ok, kernels, scopes]

    backend = _gauge(
        "jupyter_gpu_info",
        "The sampling backend (reason: why there is no GPU).",
        ("backend", "simulated", "reason", "driver_version", "Hostname"),
    )
    waited_s = sample.nvml_wait_s
    waiting = waited_s is not None
    backend.add_metric(
        [
            info.backend,
            str(info.simulated).lower(),
            # One label while NVML has not answered, not one per second the reason counts.
            NVML_NOT_ANSWERED_LABEL if waiting else info.reason or "",
            info.driver_version or "",
            host,
        ],
        1,
    )
    out.append(backend)
    if waited_s is not None:
        wait = _gauge(
            "jupyter_gpu_nvml_wait_seconds",
            "Seconds NVML has not answered for while the server starts it (nvmlInit or "
            "counting the GPUs hung); absent once it has answered.",
        )
        wait.add_metric([], waited_s)
        out.append(wait)
    gpus = _gauge("jupyter_gpu_gpus", "How many GPUs the backend shows (simulated ones count).")
    gpus.add_metric([], len(sample.devices))
    out.append(gpus)
    ts = _gauge("jupyter_gpu_sample_timestamp_seconds", "Unix time of the sample.")
    ts.add_metric([], sample.ts)
    out.append(ts)

    h = sample.host
    for name, help_text, value in (
        ("jupyter_gpu_host_cpu_percent", "Host (or cgroup) CPU busy, in %.", h.cpu_pct),
        ("jupyter_gpu_host_cpus", "CPUs this server may use (cgroup quota).", h.cpu_count),
        ("jupyter_gpu_host_memory_used_bytes", "Host (or cgroup) memory used.", h.mem_used_bytes),
        (
            "jupyter_gpu_host_memory_total_bytes",
            "Host memory, or the cgroup's limit where there is one.",
            h.mem_total_bytes,
        ),
    ):
        family = _gauge(name, help_text)
        if value is not None:
            family.add_metric([], value)
        out.append(family)

    size = _gauge(
        "jupyter_gpu_compile_cache_size_bytes",
        "Size of a torch.compile cache directory.",
        ("kind", "path"),
    )
    files = _gauge(
        "jupyter_gpu_compile_cache_files",
        "Files in a torch.compile cache directory.",
        ("kind", "path"),
    )
    for cache_dir in sample.compile_cache.dirs:
        size.add_metric([cache_dir.kind, cache_dir.path], cache_dir.size_bytes)
        files.add_metric([cache_dir.kind, cache_dir.path], cache_dir.file_count)
    out += [size, files]
    return out


def health_families(
    sample: Sample, sampler: Sampler | None, clients: int | None, now: float
) -> list[Metric]:
    """The sampler's health at scrape time: how old the latest sample is, is it still running."""
    last = _gauge(
        "jupyter_gpu_sampler_last_success_timestamp_seconds",
        "Unix time of the last successful sample (the latest one served).",
    )
    last.add_metric([], sample.ts)
    age = _gauge(
        "jupyter_gpu_sampler_sample_age_seconds",
        "Seconds since the last successful sample, at scrape time (grows while the sampler "
        "is stuck; alert on it rather than on the GPU series, which keep their last values).",
    )
    # The sampler's own monotonic age when there is a sampler (a wall-clock step cannot fake
    # it); else the sample's timestamp against the clock.
    measured = sampler.last_sample_age_s() if sampler is not None else None
    age.add_metric([], measured if measured is not None else max(0.0, now - sample.ts))
    out: list[Metric] = [last, age]
    if sampler is not None:
        running = _gauge("jupyter_gpu_sampler_running", "1 while the sampler thread is alive.")
        running.add_metric([], 1 if sampler.running else 0)
        out.append(running)
        if sampler.last_tick_s is not None:
            tick = _gauge("jupyter_gpu_sampler_tick_seconds", "Duration of the last sampler tick.")
            tick.add_metric([], sampler.last_tick_s)
            out.append(tick)
    if clients is not None:
        stream = _gauge("jupyter_gpu_stream_clients", "WebSocket stream clients connected.")
        stream.add_metric([], clients)
        out.append(stream)
    return out


class SampleCollector:
    """A ``prometheus_client`` collector over a sampler's latest sample.

    Args:
        latest: returns the latest sample and the backend's info, or ``None`` before them.
        sampler: returns the sampler, for its health series (``None``: left out).
        clients: returns how many stream clients are connected (``None``: left out).
        user: the ``user`` label of per-kernel series (default: ``server_user()``).
        clock: Unix time now (tests pass their own).
    """

    def __init__(
        self,
        latest: Callable[[], tuple[Sample, BackendInfo] | None],
        *,
        sampler: Callable[[], Sampler] | None = None,
        clients: Callable[[], int] | None = None,
        user: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._latest = latest
        self._sampler = sampler
        self._clients = clients
        self.user = user if user is not None else server_user()
        self.host = socket.gethostname()
        self._clock = clock
        self._cache: tuple[int, float, list[Metric]] | None = None
        self.builds = 0
        """How many times families were built (one per sample however many scrapes)."""

    def collect(self) -> Iterator[Metric]:
        current = self._latest()
        if current is None:
            return
        sample, info = current
        cached = self._cache
        if cached is None or (cached[0], cached[1]) != (sample.seq, sample.ts):
            cached = (sample.seq, sample.ts, sample_families(sample, info, self.user, self.host))
            self._cache = cached
            self.builds += 1
        yield from cached[2]
        clients = self._clients() if self._clients is not None else None
        sampler = self._sampler() if self._sampler is not None else None
        yield from health_families(sample, sampler, clients, self._clock())


def registry_for(collector: SampleCollector) -> CollectorRegistry:
    """A registry of its own (not the process-wide default) holding only ``collector``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def render_metrics(
    sample: Sample, info: BackendInfo, *, user: str | None = None, now: float | None = None
) -> str:
    """Prometheus exposition text (format 0.0.4) for one sample, without the sampler series."""
    collector = SampleCollector(
        lambda: (sample, info), user=user, clock=(lambda: now) if now is not None else time.time
    )
    return generate_latest(registry_for(collector)).decode()
