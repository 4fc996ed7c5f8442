"""The records serialise through one mechanism (``jupyter_gpu.json_record``), as the API says."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from typing import Any

import pytest

from jupyter_gpu.json_record import JsonRecord, json_fields
from jupyter_gpu.readings import (
    BackendInfo,
    CacheDirSample,
    CompileCacheSample,
    DeviceInfo,
    DeviceSample,
    HostSample,
    MigInfo,
    ProcessSample,
    Sample,
)
from jupyter_gpu.server.openapi import openapi_document

MIG = MigInfo(0, "GPU-0", 1, 0, "1g.18gb")
DIR = CacheDirSample("inductor", "/tmp/c", True, 10, 2, "d1", identity=(5, 6))
PLAIN = [  # records without a mapping field, where dataclasses.asdict works as well
    ProcessSample(1, "python", 5, "k", "a.ipynb", 3.0, True),
    MIG,
    DeviceInfo(0, "MIG-0", "H200", 1 << 30, 700.0, "0:18", MIG),
    HostSample(1.0, 2.0, 3, 4, "cgroup"),
    DIR,
    CompileCacheSample(10, 2, 1.5, (DIR,), True),
]
DEVICE = DeviceSample(
    0,
    "GPU-0",
    "H200",
    util_pct=50.0,
    processes=(PLAIN[0],),
    unavailable={"power_w": "Not Supported"},
    stale=("gpm",),
)
# Each record and the OpenAPI schema of its JSON (BackendInfo's is the devices body, less what
# the service adds).
SCHEMAS: list[tuple[type, str, set[str]]] = [
    (ProcessSample, "Process", set()),
    (DeviceInfo, "DeviceInfo", set()),
    (DeviceSample, "DeviceSample", set()),
    (HostSample, "Host", set()),
    (CacheDirSample, "CacheDir", set()),
    (CompileCacheSample, "CompileCache", set()),
    (Sample, "Sample", set()),
    (BackendInfo, "Devices", {"api_version", "hostname", "jupyter_gpu_version", "config"}),
]


@pytest.mark.parametrize("record", PLAIN, ids=lambda r: type(r).__name__)
def test_to_dict_is_asdict_less_what_the_api_leaves_out(record: Any) -> None:
    expected = {k: v for k, v in dataclasses.asdict(record).items() if k != "identity"}
    if isinstance(record, CompileCacheSample):
        expected["dirs"] = [
            {k: v for k, v in d.items() if k != "identity"} for d in expected["dirs"]
        ]
    assert json.dumps(record.to_dict()) == json.dumps(expected)


def test_nested_records_tuples_and_mappings_become_plain() -> None:
    out = DEVICE.to_dict()
    assert out["processes"] == [PLAIN[0].to_dict()]
    assert out["unavailable"] == {"power_w": "Not Supported"}
    assert out["stale"] == ["gpm"]
    assert type(out["unavailable"]) is dict  # a MappingProxyType would not dump
    json.dumps(out)


def test_gpu_available_is_worked_out_and_kept_in_order() -> None:
    info = BackendInfo("simulated", True, None, devices=(PLAIN[2],))
    assert info.gpu_available
    assert list(info.to_dict())[:4] == ["backend", "simulated", "gpu_available", "reason"]
    assert not replace(info, devices=()).gpu_available
    assert not BackendInfo("none", False, "no driver").gpu_available


@pytest.mark.parametrize(("record", "schema", "added"), SCHEMAS, ids=[s for _, s, _ in SCHEMAS])
def test_the_fields_are_the_schema(record: type, schema: str, added: set[str]) -> None:
    assert issubclass(record, JsonRecord)
    component = openapi_document()["components"]["schemas"][schema]
    assert set(json_fields(record)) | added == set(component["required"])
    assert set(component["properties"]) == set(component["required"])
