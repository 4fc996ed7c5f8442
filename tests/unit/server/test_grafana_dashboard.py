"""docs/grafana-dashboard.json queries only series that jupyter-gpu (or dcgm-exporter) serves."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from jupyter_gpu.readings import (
    BackendInfo,
    DeviceInfo,
    DeviceSample,
    HostSample,
    ProcessSample,
    Sample,
)
from jupyter_gpu.server.metrics import render_metrics

DASHBOARD = Path(__file__).resolve().parents[3] / "docs" / "grafana-dashboard.json"
METRIC = re.compile(r"\b(DCGM_FI_[A-Z_]+|jupyter_gpu_[a-z_]+)\b")


def served_names() -> set[str]:
    info = BackendInfo(
        "nvml", False, None, "580", "13.0", (DeviceInfo(0, "GPU-a", "H200", 1, 1.0, "b"),)
    )
    device = DeviceSample(
        0,
        "GPU-a",
        "H200",
        util_pct=1.0,
        mem_used_bytes=1,
        mem_total_bytes=2,
        power_w=1.0,
        temperature_c=1.0,
        sm_active_pct=1.0,
        tensor_active_pct=1.0,
        processes=(ProcessSample(1, "python", 5, "k", "a.ipynb"),),
    )
    sample = Sample(1, 1.0, "nvml", False, None, (device,), HostSample(1.0, 1.0, 1, 2))
    text = render_metrics(sample, info, user="u", now=2.0)
    return {f.name for f in text_string_to_metric_families(text)}


def test_every_queried_series_is_served_with_the_labels_used() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])] + [
        v["definition"] for v in dashboard["templating"]["list"] if v["type"] == "query"
    ]
    used = {m for q in queries for m in METRIC.findall(q)}
    assert used
    assert used <= served_names()
    for q in queries:  # the labels shared with dcgm-exporter, and ours on our series
        for label in re.findall(r"(\w+)=~", q):
            assert label in {"Hostname", "gpu", "user"}, q
    assert dashboard["uid"] == "jupyter-gpu-fleet"
