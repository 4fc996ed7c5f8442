"""On a real GPU: the one timing method times a step's steady state, and agrees with a peer.

- A step whose host work comes before its GPU work (a compiled call's guards, a step's Python)
  reads its steady-state time, the GPU's, when the GPU is the bottleneck: a 2 ms kernel after
  1 ms of host work against the same kernel at once, no measurable difference, each at the
  kernel's own time. Before the lead-in call (``compare.py``, 4), blocks of two calls read the
  late one 0.8x: the clock started on an idle GPU and timed the host's first millisecond.
- ``benchmarks/timing_peer.py``'s pairs (a matmul in two dtypes, a GPT forward eager against
  torch.compile, the forward against itself): ``compare``'s ratio agrees with
  ``torch.utils.benchmark``'s on the same callables, in one process, wherever both runs saw a
  steady machine (the script says why an unsteady one is not judged).

Run on the GPU machine (about a minute): ``python3 -m pytest -m gpu tests/gpu/test_compare_gpu.py``.
The figures go to ``$JUPYTER_GPU_OUT/timing_peer.json``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.helpers import load_script  # noqa: E402  # after the path is set

pytestmark = pytest.mark.gpu


def test_a_step_that_starts_with_host_work_is_timed_at_its_steady_state() -> None:
    import torch

    from jupyter_gpu.measure import compare

    idle = load_script(ROOT / "benchmarks" / "idle_ground_truth.py")
    cycles, kernel_s = idle.calibrate(torch, 2e-3)

    def at_once() -> None:
        torch.cuda._sleep(cycles)

    def late() -> None:
        time.sleep(1e-3)  # the host's share of the step, before its kernel
        torch.cuda._sleep(cycles)

    c = compare({"at once": at_once, "late": late}, device="cuda", calls=2, target_s=2.0)
    ratio = c.ratio("late")
    print(f"kernel {kernel_s * 1e3:.3f} ms; {c.method()}")
    for name in c:
        print(f"{name}: {c[name].median_s * 1e3:.3f} ms a call")
    print(f"late: {ratio.describe()}")
    assert c.lead_in
    assert "lead-in" in c.method()
    assert 0.98 <= ratio.value <= 1.02, ratio.describe()
    for name in c:
        assert c[name].median_s == pytest.approx(kernel_s, rel=0.03), name


def test_the_ratios_agree_with_torch_utils_benchmark() -> None:
    peer = load_script(ROOT / "benchmarks" / "timing_peer.py")
    status = peer.main(["--device", "cuda", "--seconds", "3"])
    if status == 2:
        pytest.skip("no pair could be judged: the machine was not steady (the script said how)")
    assert status == 0
