"""The Prometheus text: DCGM names and labels, missing values left out, label values escaped."""

from __future__ import annotations

import re

from jupyter_gpu.sampling import (
    BackendInfo,
    CacheDirSample,
    CompileCacheSample,
    DeviceInfo,
    DeviceSample,
    HostSample,
    ProcessSample,
    Sample,
)
from jupyter_gpu.server.metrics import render_metrics
from jupyter_gpu.server.serialize import dumps, history_body, snapshot_body, stream_message

LINE = re.compile(
    r'^[A-Za-z_:][A-Za-z0-9_:]*(\{([A-Za-z_][A-Za-z0-9_]*="(\\.|[^"\\])*",?)*\})? \S+$'
)


def make_sample() -> tuple[Sample, BackendInfo]:
    info = BackendInfo(
        "nvml",
        False,
        None,
        "580.1",
        "13.0",
        (DeviceInfo(0, "GPU-a", "NVIDIA H200", 100 * 2**20, 700.0, "00000000:18:00.0"),),
    )
    device = DeviceSample(
        0,
        "GPU-a",
        "NVIDIA H200",
        util_pct=87.0,
        mem_used_bytes=40 * 2**20,
        mem_total_bytes=100 * 2**20,
        power_w=None,  # not supported: no series line
        temperature_c=54.0,
        sm_clock_mhz=1980,
        processes=(ProcessSample(42, "python3", 2**20, "k-1", 'nb/"quoted"\\name.ipynb'),),
        unavailable={"power_w": "Not Supported"},
    )
    host = HostSample(12.5, 16.0, 2**30, 2**31, "cgroup")
    cache = CompileCacheSample(10, 2, 1.0, (CacheDirSample("inductor", "/tmp/ti", True, 10, 2),))
    return Sample(7, 1764480000.5, "nvml", False, None, (device,), host, cache), info


def test_dcgm_names_units_and_labels() -> None:
    sample, info = make_sample()
    text = render_metrics(sample, info)
    lines = text.splitlines()
    assert text.endswith("\n")
    assert "# TYPE DCGM_FI_DEV_GPU_UTIL gauge" in lines
    util = next(line for line in lines if line.startswith("DCGM_FI_DEV_GPU_UTIL{"))
    assert util.endswith(" 87")
    for label in ('gpu="0"', 'UUID="GPU-a"', 'modelName="NVIDIA H200"', "Hostname="):
        assert label in util
    assert any(line.startswith("DCGM_FI_DEV_FB_USED{") and line.endswith(" 40") for line in lines)
    assert any(line.startswith("DCGM_FI_DEV_FB_FREE{") and line.endswith(" 60") for line in lines)
    assert not any(line.startswith("DCGM_FI_DEV_POWER_USAGE") for line in lines)
    assert "jupyter_gpu_sample_timestamp_seconds 1764480000.5" in lines
    assert any(line.startswith('jupyter_gpu_compile_cache_files{kind="inductor"') for line in lines)


def test_every_line_is_valid_exposition_format_with_escaped_labels() -> None:
    sample, info = make_sample()
    text = render_metrics(sample, info)
    for line in text.splitlines():
        if not line.startswith("#"):
            assert LINE.match(line), line
    assert 'notebook="nb/\\"quoted\\"\\\\name.ipynb"' in text


def test_json_helpers_never_emit_nan() -> None:
    assert dumps({"a": float("nan"), "b": [float("inf"), 1.5]}) == '{"a":null,"b":[null,1.5]}'
    assert stream_message('{"seq":1}', 0.25) == '{"type":"sample","age_s":0.250,"sample":{"seq":1}}'
    assert snapshot_body('{"seq":1}', -1.0) == '{"seq":1,"age_s":0.000}'
    assert history_body(0.5, ["{}", "{}"]) == '{"interval_s":0.5,"samples":[{},{}]}'
