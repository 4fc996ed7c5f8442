"""The Prometheus text, read back with prometheus_client's own parser.

DCGM names and labels, missing values left out, label values escaped, per-kernel memory by
notebook and user (no pid), one build of the families per sample, the sampler's health.
"""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from jupyter_gpu.readings import (
    BackendInfo,
    CacheDirSample,
    CompileCacheSample,
    DeviceInfo,
    DeviceSample,
    HostSample,
    ProcessSample,
    Sample,
)
from jupyter_gpu.server.metrics import SampleCollector, registry_for, render_metrics
from jupyter_gpu.server.serialize import dumps, history_body, snapshot_body, stream_message

NOTEBOOK = 'nb/"quoted"\\name.ipynb'


def make_sample(
    seq: int = 7, processes: tuple[ProcessSample, ...] | None = None
) -> tuple[Sample, BackendInfo]:
    info = BackendInfo(
        "nvml",
        False,
        None,
        "580.1",
        "13.0",
        (DeviceInfo(0, "GPU-a", "NVIDIA H200", 100 * 2**20, 700.0, "00000000:18:00.0"),),
    )
    if processes is None:
        processes = (
            ProcessSample(42, "python3", 2**20, "k-1", NOTEBOOK),
            ProcessSample(43, "python3", 2**20, "k-1", NOTEBOOK),  # a worker of the same kernel
            ProcessSample(44, "bash", 5, None, None),  # this server's, not a kernel
            ProcessSample(None, None, 3 * 2**20, scope="other", process_count=2),
            ProcessSample(None, None, 7, scope="unattributable", reason="Not attributable: ..."),
        )
    device = DeviceSample(
        0,
        "GPU-a",
        "NVIDIA H200",
        util_pct=87.0,
        mem_used_bytes=40 * 2**20,
        mem_total_bytes=100 * 2**20,
        power_w=None,  # not supported: no series
        temperature_c=54.0,
        sm_clock_mhz=1980,
        tensor_active_pct=72.0,
        processes=processes,
        unavailable={"power_w": "Not Supported"},
    )
    host = HostSample(12.5, 16.0, 2**30, 2**31, "cgroup")
    cache = CompileCacheSample(10, 2, 1.0, (CacheDirSample("inductor", "/tmp/ti", True, 10, 2),))
    return Sample(seq, 1764480000.5, "nvml", False, None, (device,), host, cache), info


def parse(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_dcgm_names_units_and_labels() -> None:
    sample, info = make_sample()
    families = parse(render_metrics(sample, info, user="alice"))
    assert families["DCGM_FI_DEV_GPU_UTIL"].type == "gauge"
    (util,) = families["DCGM_FI_DEV_GPU_UTIL"].samples
    assert util.value == 87.0
    assert util.labels["gpu"] == "0"
    assert util.labels["UUID"] == "GPU-a"
    assert util.labels["modelName"] == "NVIDIA H200"
    assert util.labels["pci_bus_id"] == "00000000:18:00.0"
    assert util.labels["Hostname"]
    assert families["DCGM_FI_DEV_FB_USED"].samples[0].value == 40
    assert families["DCGM_FI_DEV_FB_FREE"].samples[0].value == 60
    assert "DCGM_FI_DEV_POWER_USAGE" not in families  # not supported: left out, not 0
    assert families["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"].samples[0].value == 0.72  # DCGM: a ratio
    assert "DCGM_FI_PROF_SM_ACTIVE" not in families
    ts = families["jupyter_gpu_sample_timestamp_seconds"].samples[0].value
    assert ts == 1764480000.5
    (files,) = families["jupyter_gpu_compile_cache_files"].samples
    assert (files.labels, files.value) == ({"kind": "inductor", "path": "/tmp/ti"}, 2)


def test_per_kernel_memory_is_by_notebook_and_user_never_pid() -> None:
    sample, info = make_sample()
    families = parse(render_metrics(sample, info, user="alice"))
    (kernel,) = families["jupyter_gpu_kernel_memory_bytes"].samples
    assert kernel.labels["notebook"] == NOTEBOOK  # escaped in the text, intact when parsed
    assert kernel.labels["user"] == "alice"
    assert kernel.value == 2 * 2**20  # the kernel and its worker, summed
    for family in families.values():
        for s in family.samples:
            assert "pid" not in s.labels
            assert "process" not in s.labels
    scopes = {
        s.labels["scope"]: s.value for s in families["jupyter_gpu_processes_memory_bytes"].samples
    }
    assert scopes == {"server": 2 * 2**20 + 5, "other": 3 * 2**20, "unattributable": 7}


def test_a_kernel_series_is_gone_once_its_process_is() -> None:
    current = [make_sample(1)]
    collector = SampleCollector(lambda: current[0], user="alice", clock=lambda: 1764480001.0)
    registry = registry_for(collector)
    from prometheus_client import generate_latest

    before = parse(generate_latest(registry).decode())
    assert len(before["jupyter_gpu_kernel_memory_bytes"].samples) == 1
    current[0] = make_sample(2, processes=())
    after = parse(generate_latest(registry).decode())
    assert after["jupyter_gpu_kernel_memory_bytes"].samples == []


def test_families_are_built_once_per_sample_and_health_every_scrape() -> None:
    from prometheus_client import generate_latest

    now = [1764480001.0]
    current = [make_sample(1)]
    collector = SampleCollector(lambda: current[0], user="u", clock=lambda: now[0])
    registry = registry_for(collector)
    first = parse(generate_latest(registry).decode())
    now[0] += 30.0  # the sampler is stuck: same sample, later scrape
    second = parse(generate_latest(registry).decode())
    assert collector.builds == 1
    assert first["jupyter_gpu_sampler_sample_age_seconds"].samples[0].value == 0.5
    assert second["jupyter_gpu_sampler_sample_age_seconds"].samples[0].value == 30.5
    last = second["jupyter_gpu_sampler_last_success_timestamp_seconds"].samples[0].value
    assert last == 1764480000.5
    current[0] = make_sample(2)
    generate_latest(registry)
    assert collector.builds == 2


def test_label_values_are_escaped_in_the_text() -> None:
    sample, info = make_sample()
    text = render_metrics(sample, info, user="alice")
    assert 'notebook="nb/\\"quoted\\"\\\\name.ipynb"' in text


def test_no_gpu_still_serves_the_backend_and_host() -> None:
    info = BackendInfo("none", False, "NVML Shared Library Not Found")
    sample = Sample(1, 5.0, "none", False, info.reason, (), HostSample(1.0, 2.0, 3, 4))
    families = parse(render_metrics(sample, info, now=6.0))
    (backend,) = families["jupyter_gpu_info"].samples
    assert backend.labels["reason"] == "NVML Shared Library Not Found"
    assert families["jupyter_gpu_gpus"].samples[0].value == 0
    assert "jupyter_gpu_kernel_memory_bytes" not in families
    assert families["jupyter_gpu_host_memory_total_bytes"].samples[0].value == 4


def test_json_helpers_never_emit_nan() -> None:
    assert dumps({"a": float("nan"), "b": [float("inf"), 1.5]}) == '{"a":null,"b":[null,1.5]}'
    assert stream_message('{"seq":1}', 0.25) == '{"type":"sample","age_s":0.250,"sample":{"seq":1}}'
    assert snapshot_body('{"seq":1}', -1.0) == '{"seq":1,"age_s":0.000}'
    assert history_body(0.5, ["{}", "{}"]) == '{"interval_s":0.5,"samples":[{},{}]}'
