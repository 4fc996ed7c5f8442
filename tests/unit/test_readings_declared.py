"""A reading declared in its one place (``jupyter_gpu/readings/catalog.py``) reaches every layer.

The test declares one more metric (and nothing else: no record field, no column, no gauge, no
TypeScript), has a backend read it, and runs the real sampler: the reading is in the device
record and its JSON, in the long history's columns, in the Prometheus text, in the served
OpenAPI schema and in the browser's generated table.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from jupyter_gpu.readings import catalog
from jupyter_gpu.readings.deadline import Timed
from jupyter_gpu.readings.records import GroupReading
from jupyter_gpu.readings.typescript import typescript
from jupyter_gpu.sampling import Sampler, SamplerOptions
from jupyter_gpu.sampling.columns import ColumnsQuery
from jupyter_gpu.sampling.freshness import StaleAfter, merge_readings
from jupyter_gpu.sampling.history import Entry
from jupyter_gpu.server.metrics import render_metrics
from jupyter_gpu.server.openapi import openapi_document
from jupyter_gpu.server.serialize import encode_sample
from jupyter_gpu.simulated.backend import SimulatedBackend
from tests.helpers import wait_for

EXTRA = catalog.Metric(
    "board_power_w",
    "gpm",
    help="A test's reading: what the whole board draws, in W.",
    prometheus=catalog.Prometheus("JUPYTER_GPU_TEST_BOARD_POWER", "A test's reading (in W)."),
    long_history=True,
    chart="power",
    label="Board",
    card_label="board",
)


class WithBoardPower(SimulatedBackend):
    """The simulated GPUs, whose GPM read also gives the extra reading (100 W + the index)."""

    def read_group(self, group: str, index: int) -> GroupReading | None:
        reading = super().read_group(group, index)
        if group == "gpm" and reading is not None:
            values = {**reading.values, EXTRA.field: 100.0 + index}
            return replace(reading, values=values)
        return reading


@pytest.fixture
def declared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalog, "METRICS", (*catalog.METRICS, EXTRA))


@pytest.fixture
def sampler(declared: None, tmp_path: Path) -> Iterator[Sampler]:
    options = SamplerOptions(backend="simulated", interval_s=0.1, gpm_interval_s=0.1)
    made = Sampler(
        options,
        encode=encode_sample,
        backend_factory=lambda _sampler: WithBoardPower(2),
        caches=(("inductor", str(tmp_path / "inductor")),),
    )
    made.start()
    yield made
    made.stop()


def _read_on_both(sampler: Sampler) -> Entry | None:
    """The latest sample, once it holds the extra reading of both GPUs."""
    entry = sampler.latest()
    if entry is None or [d.board_power_w for d in entry.sample.devices] != [100.0, 101.0]:
        return None
    return entry


def test_the_reading_reaches_the_record_history_prometheus_schema_and_browser(
    sampler: Sampler,
) -> None:
    # Both GPUs' readings in one sample. On a busy machine a tick can find one GPU's GPM
    # reading older than two intervals (the round reads the GPUs one after the other) and so
    # stale, and hold nothing for it: the ring's samples once all lacked GPU 0's.
    entry = wait_for(lambda: _read_on_both(sampler), "no sample read both GPUs", timeout_s=30)
    assert entry is not None  # (wait_for returns a truthy result)
    device = entry.sample.devices[1]
    # The record, and its JSON: in the catalog's order, after the readings declared before.
    assert device.value("board_power_w") == 101.0
    keys = list(device.to_dict())
    assert keys[keys.index("processes") - 1] == "board_power_w"
    assert json.loads(entry.json)["devices"][1]["board_power_w"] == 101.0
    # The long history keeps it: a column of the buckets, with its min/mean/max.
    columns = sampler.buckets.query(resolution_s=sampler.buckets.bucket_s)["series"]
    assert 101.0 in columns["gpu.1.board_power_w"]["max"]
    recent = sampler.history_columns(entry.sample.ts, ColumnsQuery(0.0, 1.0))  # from the ring
    assert "gpu.0.board_power_w" in recent["series"]
    # Prometheus: its series, with the device's labels.
    info = sampler.info
    assert info is not None
    text = render_metrics(entry.sample, info)
    assert "# HELP JUPYTER_GPU_TEST_BOARD_POWER A test's reading (in W)." in text
    assert 'JUPYTER_GPU_TEST_BOARD_POWER{GPU_I_ID="",GPU_I_PROFILE="",Hostname=' in text
    assert any(
        line.startswith("JUPYTER_GPU_TEST_BOARD_POWER{")
        and 'gpu="1"' in line
        and line.endswith(" 101.0")
        for line in text.splitlines()
    )
    # The served schema: required, nullable, with its help.
    schema = openapi_document()["components"]["schemas"]["DeviceSample"]
    assert "board_power_w" in schema["required"]
    assert schema["properties"]["board_power_w"] == {
        "type": ["number", "null"],
        "description": EXTRA.help,
    }
    # The browser's table: a metric name of the gpm group, on the power chart and the card.
    ts = typescript()
    assert "  | 'board_power_w';" in ts
    assert "  board_power_w?: number | null;" in ts
    assert (
        "    name: 'board_power_w',\n    group: 'gpm',\n    unit: 'w',\n    chart: 'power'," in ts
    )
    assert "'dram_bw_pct', 'board_power_w'" in ts.replace("\n    ", " ").replace("[ ", "[")


def test_a_stale_group_takes_the_reading_with_it(declared: None) -> None:
    backend = WithBoardPower(1)
    fast = backend.read_group("fast", 0)
    gpm = backend.read_group("gpm", 0)
    assert fast is not None
    assert gpm is not None
    (device,) = merge_readings(
        backend.info().devices,
        [(fast, 10.0)],
        {"gpm": {0: Timed(gpm, 0.0)}},  # read 10 s before the sample
        10.0,
        StaleAfter.two_intervals({"gpm": 1.0}),
    )
    assert device.stale == ("gpm",)
    assert device.board_power_w is None  # stale with its group: never served as live
