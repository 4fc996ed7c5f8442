"""The latest sample in Prometheus text format, with the names dcgm-exporter uses.

GPU series carry dcgm-exporter's labels (``gpu``, ``UUID``, ``modelName``, ``Hostname``, plus
``pci_bus_id``), so existing DCGM dashboards work on them. Host and compile-cache series are
``jupyter_gpu_*``. A value that could not be read is left out (Prometheus has no null).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from jupyter_gpu.sampling import BackendInfo, DeviceSample, Sample

if TYPE_CHECKING:
    from jupyter_gpu.server.service import GpuService

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_MIB = 1024 * 1024

# name, help, value of a device sample (None: leave the series out)
_DEVICE_GAUGES: tuple[tuple[str, str, Callable[[DeviceSample], float | None]], ...] = (
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", lambda d: d.util_pct),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", lambda d: d.mem_util_pct),
    (
        "DCGM_FI_DEV_FB_USED",
        "Framebuffer memory used (in MiB).",
        lambda d: d.mem_used_bytes / _MIB if d.mem_used_bytes is not None else None,
    ),
    (
        "DCGM_FI_DEV_FB_FREE",
        "Framebuffer memory free (in MiB).",
        lambda d: (
            (d.mem_total_bytes - d.mem_used_bytes) / _MIB
            if d.mem_total_bytes is not None and d.mem_used_bytes is not None
            else None
        ),
    ),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", lambda d: d.power_w),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "Enforced power limit (in W).", lambda d: d.power_limit_w),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", lambda d: d.temperature_c),
    (
        "DCGM_FI_DEV_SM_CLOCK",
        "SM clock frequency (in MHz).",
        lambda d: float(d.sm_clock_mhz) if d.sm_clock_mhz is not None else None,
    ),
    (
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "PCIe transmitted bytes per second (slow metric, when enabled).",
        lambda d: d.pcie_tx_bytes_per_s,
    ),
    (
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "PCIe received bytes per second (slow metric, when enabled).",
        lambda d: d.pcie_rx_bytes_per_s,
    ),
)


def _escape(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, object]]) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs if v is not None)
    return "{" + inner + "}" if inner else ""


def _number(value: float) -> str:
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, help_text: str, kind: str = "gauge") -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")

    def value(self, name: str, labels: str, value: float | None) -> None:
        if value is not None:
            self.lines.append(f"{name}{labels} {_number(value)}")


def render_metrics(sample: Sample, info: BackendInfo, service: GpuService | None = None) -> str:
    """Prometheus exposition text (format 0.0.4) for one sample."""
    host = socket.gethostname()
    w = _Writer()
    device_labels = {
        d.index: _labels(
            (
                ("gpu", d.index),
                ("UUID", d.uuid),
                ("modelName", d.name),
                ("Hostname", host),
                ("pci_bus_id", info.devices[d.index].pci_bus_id)
                if d.index < len(info.devices)
                else ("pci_bus_id", None),
            )
        )
        for d in sample.devices
    }
    for name, help_text, get in _DEVICE_GAUGES:
        values = [(device_labels[d.index], get(d)) for d in sample.devices]
        if any(v is not None for _, v in values):
            w.family(name, help_text)
            for labels, v in values:
                w.value(name, labels, v)

    if sample.devices:
        w.family("jupyter_gpu_device_ok", "1 if the GPU answers, 0 if lost or unreadable.")
        for d in sample.devices:
            w.value("jupyter_gpu_device_ok", device_labels[d.index], 1 if d.state == "ok" else 0)
        w.family(
            "jupyter_gpu_process_memory_bytes",
            "GPU memory held by a process, with the kernel and notebook that own it.",
        )
        for d in sample.devices:
            for p in d.processes:
                labels = _labels(
                    (
                        ("gpu", d.index),
                        ("UUID", d.uuid),
                        ("pid", p.pid),
                        ("process", p.name),
                        ("kernel_id", p.kernel_id),
                        ("notebook", p.notebook),
                    )
                )
                w.value("jupyter_gpu_process_memory_bytes", labels, p.used_mem_bytes)

    w.family("jupyter_gpu_info", "The sampling backend (reason: why there is no GPU).")
    w.value(
        "jupyter_gpu_info",
        _labels(
            (
                ("backend", info.backend),
                ("simulated", str(info.simulated).lower()),
                ("reason", info.reason),
                ("driver_version", info.driver_version),
                ("Hostname", host),
            )
        ),
        1,
    )
    w.family("jupyter_gpu_gpus", "How many GPUs the backend shows (simulated ones count).")
    w.value("jupyter_gpu_gpus", "", len(sample.devices))
    w.family("jupyter_gpu_sample_timestamp_seconds", "Unix time of the sample.")
    w.value("jupyter_gpu_sample_timestamp_seconds", "", sample.ts)

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
        w.family(name, help_text)
        w.value(name, "", value)

    cc = sample.compile_cache
    w.family("jupyter_gpu_compile_cache_size_bytes", "Size of a torch.compile cache directory.")
    cache_labels = [(_labels((("kind", d.kind), ("path", d.path))), d) for d in cc.dirs]
    for labels, cache_dir in cache_labels:
        w.value("jupyter_gpu_compile_cache_size_bytes", labels, cache_dir.size_bytes)
    w.family("jupyter_gpu_compile_cache_files", "Files in a torch.compile cache directory.")
    for labels, cache_dir in cache_labels:
        w.value("jupyter_gpu_compile_cache_files", labels, cache_dir.file_count)

    if service is not None:
        w.family("jupyter_gpu_stream_clients", "WebSocket stream clients connected.")
        w.value("jupyter_gpu_stream_clients", "", service.client_count)
        w.family("jupyter_gpu_sampler_tick_seconds", "Duration of the last sampler tick.")
        w.value("jupyter_gpu_sampler_tick_seconds", "", service.sampler.last_tick_s)
    return "\n".join(w.lines) + "\n"
