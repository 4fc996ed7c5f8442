"""Notebook 00's roofline: the counts, the roof, the timing through compare, and the chart."""

from __future__ import annotations

import math

import pytest
import torch

from jupyter_gpu.tutorials.plots import PLOTLY_MIMETYPE
from jupyter_gpu.tutorials.roofline import (
    Point,
    Roof,
    add_workload,
    copy_workload,
    matmul_workload,
    measure_points,
    roofline_chart,
)


def test_the_counts_are_each_tensor_once() -> None:
    add = add_workload(1000, torch.float32, "cpu")
    assert add.flops == 1000
    assert add.bytes_moved == 3 * 1000 * 4  # two read, one written
    assert add.intensity == pytest.approx(1 / 12)
    copy = copy_workload(1000, torch.float32, "cpu")
    assert (copy.flops, copy.bytes_moved) == (0.0, 2 * 1000 * 4)
    mm = matmul_workload(32, 64, 128, torch.bfloat16, "cpu")
    assert mm.flops == 2 * 32 * 64 * 128
    assert mm.bytes_moved == 2 * (32 * 64 + 64 * 128 + 32 * 128)


def test_the_workloads_compute_what_they_say() -> None:
    add = add_workload(16, torch.float32, "cpu")
    out = add.run()
    assert isinstance(out, torch.Tensor)
    assert out.shape == (16,)
    mm = matmul_workload(4, 8, 2, torch.float32, "cpu")
    assert mm.run().shape == (4, 2)


def test_the_roof_meets_at_the_ridge() -> None:
    roof = Roof(bytes_per_s=4e12, flops_per_s=800e12)
    assert roof.ridge == pytest.approx(200)
    assert roof.attainable(10) == pytest.approx(40e12)  # under the memory roof
    assert roof.attainable(1000) == pytest.approx(800e12)  # flat: the compute roof
    assert roof.bound(10) == "memory-bound"
    assert roof.bound(1000) == "compute-bound"


def test_measure_points_times_every_workload_in_rounds() -> None:
    workloads = [
        copy_workload(4096, torch.float32, "cpu"),
        add_workload(4096, torch.float32, "cpu"),
    ]
    points = measure_points(workloads, device="cpu", rounds=6, warmup=1)
    assert [p.name for p in points] == [w.name for w in workloads]
    for point in points:
        assert point.rounds == 6
        assert point.level == pytest.approx(1 - 2 / 2**6)  # what 6 rounds reach, not 95 %
        assert 0 < point.low_s <= point.seconds <= point.high_s
        low, high = point.bytes_per_s_interval()
        assert low <= point.bytes_per_s <= high
    with pytest.raises(ValueError, match="no workloads"):
        measure_points([], device="cpu", rounds=2)


def test_the_chart_is_log_log_with_the_roof_the_peak_and_the_points() -> None:
    roof = Roof(bytes_per_s=4e12, flops_per_s=600e12)
    points = [
        Point("add", 1e6, 12e6, 4e-6, 3.9e-6, 4.1e-6, 8),
        Point("matmul", 1e12, 4e8, 2e-3, 1.9e-3, 2.1e-3, 8),
    ]
    chart = roofline_chart(roof, points, title="t", peak_flops_per_s=989e12)
    figure = chart.figure
    assert figure["layout"]["xaxis"]["type"] == "log"
    assert figure["layout"]["yaxis"]["type"] == "log"
    roof_trace, peak_trace, *marks = figure["data"]
    assert max(roof_trace["y"]) == pytest.approx(600)  # TFLOP/s
    assert min(roof_trace["y"]) == pytest.approx(4e12 * roof_trace["x"][0] / 1e12)
    assert peak_trace["y"] == [989.0, 989.0]
    assert [m["name"] for m in marks] == ["add", "matmul"]
    assert marks[1]["y"] == [pytest.approx(500)]
    bundle = chart._repr_mimebundle_()
    assert PLOTLY_MIMETYPE in bundle
    assert bundle["text/html"].startswith("<svg")
    assert "ridge at 150 FLOP/byte" in chart.summary
    assert math.isfinite(points[0].intensity)


def test_a_chart_needs_a_point_that_computes() -> None:
    roof = Roof(bytes_per_s=1e12, flops_per_s=1e14)
    copy = Point("copy", 0.0, 8e6, 1e-5, 1e-5, 1e-5, 8)
    with pytest.raises(ValueError, match="arithmetic"):
        roofline_chart(roof, [copy], title="t")
