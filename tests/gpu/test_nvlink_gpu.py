"""On a real GPU: NVLink throughput from NVML's field values, and what the driver says of it.

    python3 -m pytest -m gpu tests/gpu/test_nvlink_gpu.py -x -q -s

For every GPU it prints (and writes to ``$JUPYTER_GPU_OUT/nvlink_gpu.json`` when set) what the
driver answers: each link's state (``nvmlDeviceGetNvLinkState``), the field values
``NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX`` for all links (their return code, type, value and
timestamp), how long a read of the group takes, and the reading our backend makes of it over
a 0.5 s window. Then the sampler with ``nvlink_metrics`` on serves it for a second.

It passes when every GPU's reading is either two rates of 0 or more (a GPU with active links)
or both fields unavailable with "no NVLink on this GPU" (a GPU without: on a one-H200 machine,
the links of the lone GPU are down or not supported), and the sampler agrees.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.outputs import write_json  # noqa: E402 (after the path set-up)
from jupyter_gpu.nvml.backend import NvmlBackend  # noqa: E402 (path set-up)
from jupyter_gpu.nvml.nvlink import ALL_LINKS, FIELDS, NO_NVLINK  # noqa: E402 (as above)
from jupyter_gpu.sampling import Sampler, SamplerOptions  # noqa: E402 (as above)

pytestmark = pytest.mark.gpu
WINDOW_S = 0.5


def _driver_says(nvml: Any, handle: Any) -> dict[str, Any]:
    """Each link's state and the two throughput fields, as NVML answers them."""
    states: list[Any] = []
    for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
        try:
            states.append(int(nvml.nvmlDeviceGetNvLinkState(handle, link)))
        except nvml.NVMLError as err:
            states.append(str(err))
    fields: dict[str, Any] = {}
    ids = (nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX)
    try:
        values = nvml.nvmlDeviceGetFieldValues(handle, [(i, ALL_LINKS) for i in ids])
        for name, v in zip(("tx", "rx"), values, strict=True):
            fields[name] = {
                "nvmlReturn": int(v.nvmlReturn),
                "error": str(nvml.NVMLError(v.nvmlReturn)) if v.nvmlReturn else None,
                "valueType": int(v.valueType),
                "ullVal": int(v.value.ullVal),
                "timestamp_us": int(v.timestamp),
            }
    except nvml.NVMLError as err:
        fields["call"] = str(err)
    return {"link_states": states, "fields": fields}


def test_nvlink_throughput_reads_or_says_why_not() -> None:
    import pynvml

    results: dict[str, Any] = {"gpus": []}
    backend = NvmlBackend()
    try:
        info = backend.info()
        pynvml.nvmlInit()  # the backend holds NVML open; this only counts one more init
        try:
            for device in info.devices:
                handle = pynvml.nvmlDeviceGetHandleByIndex(device.index)
                results["gpus"].append(
                    {"index": device.index, "name": device.name, **_driver_says(pynvml, handle)}
                )
        finally:
            pynvml.nvmlShutdown()
        first = time.perf_counter()
        for device in info.devices:
            backend.read_group("nvlink", device.index)  # opens each GPU's window
        results["first_read_s"] = round(time.perf_counter() - first, 6)
        time.sleep(WINDOW_S)  # the window the rates are measured over
        readings = {}
        for device in info.devices:
            started = time.perf_counter()
            reading = backend.read_group("nvlink", device.index)
            took = time.perf_counter() - started
            readings[device.index] = reading
            gpu = results["gpus"][device.index]
            gpu["read_s"] = round(took, 6)
            gpu["reading"] = (
                None
                if reading is None
                else {"values": dict(reading.values), "unavailable": dict(reading.unavailable)}
            )
    finally:
        backend.close()

    sampler = Sampler(
        SamplerOptions(backend="nvml", interval_s=0.2, nvlink_metrics=True, nvlink_interval_s=0.2),
        caches=(),
    )
    sampler.start()
    try:
        assert sampler.ready.wait(30), "no first sample in 30 s"
        deadline = time.monotonic() + 10
        served: list[Any] = []
        while time.monotonic() < deadline:
            entry = sampler.latest()
            served = list(entry.sample.devices) if entry is not None else []
            if served and all(
                d.nvlink_age_s is not None or "nvlink_tx_bytes_per_s" in d.unavailable
                for d in served
            ):
                break
            time.sleep(0.1)
        results["served"] = [
            {f: d.value(f) for f in FIELDS}
            | {"nvlink_age_s": d.nvlink_age_s, "unavailable": dict(d.unavailable)}
            for d in served
        ]
    finally:
        sampler.stop(timeout=2)

    write_json("nvlink_gpu.json", results)
    print(json.dumps(results, indent=2))

    for index, reading in readings.items():
        assert reading is not None, f"GPU {index}: no NVLink reading after a {WINDOW_S} s window"
        if reading.unavailable:
            assert set(reading.unavailable) == set(FIELDS), reading
            assert all(r.startswith(NO_NVLINK) for r in reading.unavailable.values()), reading
        else:
            assert set(reading.values) == set(FIELDS), reading
            assert all(v is not None and v >= 0 for v in reading.values.values()), reading
    assert len(results["served"]) == len(readings)
    for d in results["served"]:
        has_rates = all(d[f] is not None for f in FIELDS) and d["nvlink_age_s"] is not None
        says_why = all(d["unavailable"].get(f, "").startswith(NO_NVLINK) for f in FIELDS)
        assert has_rates or says_why, d
