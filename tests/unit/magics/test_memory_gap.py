"""``%memsummary``'s NVML gap: what lies outside torch's allocator, and the bare context's size."""

from __future__ import annotations

import psutil

from jupyter_gpu.magics.memory.context import PROBE, _measure
from jupyter_gpu.magics.memory.report import nvml_gap_text

MiB = 2**20


def test_the_gap_names_what_lies_outside_torchs_allocator_and_not_its_workspaces() -> None:
    text = nvml_gap_text(1500 * MiB, 600 * MiB, 500 * MiB, None)
    assert "The 900.0 MiB gap is memory outside torch's caching allocator" in text
    for part in ("the CUDA context", "kernel images", "NCCL's own buffers", "other libraries'"):
        assert part in text
    # torch allocates cuBLAS's and cuDNN's workspaces from its caching allocator (inside
    # reserved): the gap never holds them.
    assert "workspaces are not in it" in text
    assert "cuBLAS/cuDNN/NCCL workspaces" not in text
    assert "A bare CUDA context on this GPU takes 500.0 MiB" in text
    assert "the other 400.0 MiB" in text  # 900 - 500


def test_a_context_not_measured_says_why_and_a_larger_one_says_so() -> None:
    text = nvml_gap_text(1500 * MiB, 600 * MiB, None, "NVML did not list the probe's process")
    assert "not measured: NVML did not list the probe's process." in text
    assert "takes" not in text
    text = nvml_gap_text(1000 * MiB, 600 * MiB, 500 * MiB, None)
    assert "more than the gap" in text
    assert "the other" not in text


def test_the_probe_process_says_why_it_measured_nothing_and_is_gone() -> None:
    footprint = _measure(0, "f" * 32)  # no GPU has this UUID; here there is no driver at all
    assert footprint.used_bytes is None
    assert footprint.reason is not None
    assert footprint.reason.startswith(
        ("no CUDA driver library here", "cuInit: ", "the driver lists no GPU")
    ), footprint.reason
    probes = [
        p
        for p in psutil.Process().children(recursive=True)
        if PROBE.strip() in " ".join(p.cmdline())
    ]
    assert probes == []
