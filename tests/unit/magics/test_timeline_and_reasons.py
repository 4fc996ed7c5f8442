"""The snapshot timeline replay and graph-break reason parsing.

The snapshot here is hand-made in the shape ``torch.cuda.memory._snapshot()`` returns (a fake
GPU's history: there is no GPU in CI); tests/gpu/test_magics_gpu.py checks real ones.
"""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_gpu.magics.compile.dynamo_watch import summarize_reason
from jupyter_gpu.magics.memory.timeline import build_timeline, timeline_figure

CELL = "/tmp/ipykernel_1/123.py"
USER = [
    {"filename": "/site-packages/torch/nn/functional.py", "line": 5, "name": "linear"},
    {"filename": CELL, "line": 3, "name": "<module>"},
]


def event(action: str, addr: int, size: int, t_us: int) -> dict[str, object]:
    return {"action": action, "addr": addr, "size": size, "frames": USER, "time_us": t_us}


def test_replay_finds_the_peak_and_what_was_alive() -> None:
    trace = [
        event("segment_alloc", 0, 4096, 0),
        event("alloc", 0, 1000, 10),
        event("alloc", 1000, 2000, 20),
        event("free_requested", 0, 1000, 30),
        event("free_completed", 0, 1000, 31),
        event("alloc", 3000, 500, 40),
    ]
    snapshot = {"segments": [], "device_traces": [trace]}
    tl = build_timeline(snapshot, 0, base_allocated=100, base_reserved=0, cell_names={CELL: 7})
    assert tl.peak_bytes == 100 + 1000 + 2000
    assert tl.peak_t_s == (20 - 0) / 1e6
    assert [p.allocated_bytes for p in tl.points][-1] == 100 + 2000 + 500
    assert tl.points[0].reserved_bytes == 4096
    assert tl.alive_at_peak == [("cell [7] line 3", 3000, 2)]
    fig = timeline_figure(tl)
    assert fig["data"][0]["name"] == "allocated"
    assert len(fig["data"][0]["x"]) == len(tl.points)
    assert "cell [7] line 3" in fig["data"][0]["text"][1]


def test_replay_of_an_empty_trace() -> None:
    tl = build_timeline({"device_traces": [[]]}, 0, 5, 5, {})
    assert tl.points == []
    assert tl.peak_bytes == 0


def test_graph_break_reason_summary() -> None:
    reason = (
        "Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):\n"
        "\nFailed to trace builtin operator\n"
        "  Explanation: Dynamo does not know how to trace builtin operator `print`\n"
        "  Hint: Avoid calling builtin `print`.\n\n"
        "  Developer debug context: builtin print\n\n"
        " For more details about this graph break, please visit: "
        "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0059.html"
    )
    headline, explanation, url = summarize_reason(reason)
    assert headline == "Failed to trace builtin operator"
    assert explanation.startswith("Dynamo does not know")
    assert url is not None
    assert url.endswith("gb0059.html")
    assert summarize_reason("Tensor.item() call")[0] == "Tensor.item() call"


def test_figures_are_valid_plotly_specs() -> None:
    # plotly validates every property name and value when it builds a Figure from a dict.
    import plotly.graph_objects as go

    from jupyter_gpu.magics.output.render import Bar
    from jupyter_gpu.magics.output.render import timeline_figure as bars_figure

    trace = [event("alloc", 0, 1000, 10), event("free_completed", 0, 1000, 20)]
    timeline = build_timeline({"device_traces": [trace]}, 0, 0, 0, {CELL: 2})
    go.Figure(timeline_figure(timeline))
    bars = [Bar("CPU thread 0", 0.0, 1e-3, "aten::mm"), Bar("GPU 0 stream 7", 2e-4, 9e-4, "gemm")]
    go.Figure(bars_figure(bars, "t"))


def test_snapshot_records_python_only_stacks(monkeypatch: pytest.MonkeyPatch) -> None:
    # With every frame (C++ too) a dump took minutes where Python-only stacks take seconds.
    import torch

    from jupyter_gpu.magics.memory.timeline import recording

    calls: list[tuple[Any, dict[str, Any]]] = []

    def record(enabled: Any = "all", **kwargs: Any) -> None:
        calls.append((enabled, kwargs))

    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", record)
    monkeypatch.setattr(torch._C, "_cuda_isHistoryEnabled", lambda: False, raising=False)
    with recording(1000) as ours:
        assert ours
    assert calls[0][0] == "all"
    assert calls[0][1]["stacks"] == "python"
    assert calls[0][1]["max_entries"] == 1000
    assert calls[1][0] is None  # stopped after the block
