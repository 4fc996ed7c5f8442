"""On a real GPU: NVML's start-up behind its deadline, with the real driver.

    python3 -m pytest -m gpu tests/gpu/test_nvml_start_gpu.py -x -q

The sampler opens NVML in its own thread and waits for it a second at most before it samples
the host alone ("NVML has not answered"); on a healthy driver the open must be far quicker, so
the first sample already has the GPUs. ``%%torchrun``'s count of the GPUs and
``%gpu --topology`` start NVML behind the same deadline and must agree with torch. Writes
``nvml_start_sampler.json`` and ``nvml_start_kernel.json`` (how long each start took, the first
sample's state) to ``$JUPYTER_GPU_OUT`` when set.
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
from jupyter_gpu.nvml.topology import gpu_count, read_topology  # noqa: E402 (path set-up)
from jupyter_gpu.sampling import Sampler, SamplerOptions  # noqa: E402 (as above)
from jupyter_gpu.sampling.sampler import OPEN_WAIT_S  # noqa: E402 (as above)

pytestmark = pytest.mark.gpu


def _write(name: str, results: dict[str, Any]) -> None:
    write_json(name, results)
    print(json.dumps(results, indent=2))


def test_a_healthy_driver_opens_within_the_first_wait() -> None:
    import torch

    results: dict[str, Any] = {"torch_gpus": torch.cuda.device_count()}
    sampler = Sampler(SamplerOptions(backend="nvml", interval_s=0.2), caches=())
    began = time.monotonic()
    sampler.start()
    try:
        assert sampler.ready.wait(30), "no first sample in 30 s"
        results["first_sample_after_s"] = round(time.monotonic() - began, 3)
        first = sampler.history.since()[0].sample
        results["first_sample"] = {
            "gpus": len(first.devices),
            "nvml_wait_s": first.nvml_wait_s,
            "reason": first.reason,
        }
        opening = sampler._opening  # the open's own timing, for the record
        assert opening is not None
        assert opening.answered_at is not None
        results["open_s"] = round(opening.answered_at - opening.since, 3)
    finally:
        sampler.stop(timeout=2)
    results["threads_after_stop"] = sampler.threads_alive()
    _write("nvml_start_sampler.json", results)
    assert results["open_s"] < OPEN_WAIT_S, results  # nvmlInit, counting, opening each GPU
    assert first.nvml_wait_s is None, results
    assert len(first.devices) >= results["torch_gpus"] >= 1, results
    assert results["threads_after_stop"] == [], results


def test_the_kernel_side_starts_agree_with_torch() -> None:
    import torch

    began = time.monotonic()
    count, reason = gpu_count()
    counted_s = time.monotonic() - began
    began = time.monotonic()
    topology = read_topology()
    topology_s = time.monotonic() - began
    _write(
        "nvml_start_kernel.json",
        {"gpu_count": count, "count_s": round(counted_s, 3), "topology_s": round(topology_s, 3)},
    )
    assert (count, reason) == (torch.cuda.device_count(), None)
    assert len(topology.gpus) == count
    assert topology.reason is None
