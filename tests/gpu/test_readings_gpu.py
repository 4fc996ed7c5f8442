"""On a real GPU: each reading's age, behind the per-GPU deadline, with real NVML and GPM.

    python3 -m pytest -m gpu tests/gpu/test_readings_gpu.py -x -q

The sampler (fast reads every 0.2 s, GPM every 0.5 s, PCIe every 1 s, each GPU in its own
threads), ``read_once`` and the topology on the real driver: every reading has an age within
its stale limit, none is stale, ``stop(timeout=1)`` keeps to it and leaves no thread. Writes
``readings_gpu.json`` (the ages seen, the times taken) to ``$JUPYTER_GPU_OUT`` when set.
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
from jupyter_gpu.nvml.topology import read_topology  # noqa: E402 (path set-up)
from jupyter_gpu.sampling import Sampler, SamplerOptions, read_once  # noqa: E402 (as above)
from jupyter_gpu.sampling.freshness import StaleAfter  # noqa: E402 (as above)

pytestmark = pytest.mark.gpu

OPTIONS = SamplerOptions(
    backend="nvml",
    interval_s=0.2,
    gpm_interval_s=0.5,
    slow_metrics=True,
    slow_interval_s=1.0,
    cache_scan_interval_s=3600.0,
)
LIMITS = StaleAfter.two_intervals(
    {"fast": OPTIONS.interval_s, "gpm": OPTIONS.gpm_interval_s, "pcie": 1.0}
)


def _write(results: dict[str, Any]) -> None:
    write_json("readings_gpu.json", results)
    print(json.dumps(results, indent=2))


def test_every_reading_has_a_sane_age_on_a_real_gpu() -> None:
    results: dict[str, Any] = {}
    sampler = Sampler(OPTIONS, caches=())
    sampler.start()
    try:
        assert sampler.ready.wait(30), "no first sample in 30 s"
        time.sleep(4.0)  # a few rounds of each reader
        entries = sampler.history.since(time.time() - 2.0)
    finally:
        start = time.monotonic()
        sampler.stop(timeout=1)
        results["stop_s"] = round(time.monotonic() - start, 3)
    info = sampler.info
    assert info is not None
    assert info.backend == "nvml", info.reason
    results["threads_after_stop"] = sampler.threads_alive()
    ages: dict[str, list[float]] = {"read_age_s": [], "gpm_age_s": [], "pcie_age_s": []}
    stale: list[str] = []
    for entry in entries:
        for d in entry.sample.devices:
            assert d.state == "ok", d
            stale.extend(d.stale)
            for key in ages:
                value = getattr(d, key)
                if value is not None:
                    ages[key].append(value)
    results["samples"] = len(entries)
    results["gpus"] = len(info.devices)
    results["stale_seen"] = sorted(set(stale))
    results["max_age_s"] = {k: max(v) if v else None for k, v in ages.items()}
    results["gpm_supported"] = bool(ages["gpm_age_s"])

    once_start = time.monotonic()
    sample = read_once("nvml", slow=True)
    results["read_once_s"] = round(time.monotonic() - once_start, 3)
    results["read_once_ages"] = [
        {"read_age_s": d.read_age_s, "gpm_age_s": d.gpm_age_s, "pcie_age_s": d.pcie_age_s}
        for d in sample.devices
    ]
    topo_start = time.monotonic()
    topology = read_topology()
    results["topology_s"] = round(time.monotonic() - topo_start, 3)
    results["topology_errors"] = [g.error for g in topology.gpus if g.error]
    _write(results)

    assert results["samples"] >= 5
    assert stale == []  # nothing hung: nothing stale
    assert ages["read_age_s"]
    assert max(ages["read_age_s"]) <= LIMITS.limit_s("fast")
    if ages["gpm_age_s"]:  # Hopper and newer
        assert max(ages["gpm_age_s"]) <= LIMITS.limit_s("gpm")
    assert ages["pcie_age_s"]
    assert max(ages["pcie_age_s"]) <= LIMITS.limit_s("pcie")
    assert results["stop_s"] < 1.5
    assert results["threads_after_stop"] == []
    assert [d.state for d in sample.devices] == ["ok"] * len(sample.devices)
    assert all(d.read_age_s is not None and d.read_age_s < 1.0 for d in sample.devices)
    assert results["read_once_s"] < 2.0
    assert results["topology_errors"] == []
