"""On a real GPU: the tutorials' tier comes from the memory this process may use.

(Notebook 03's expandable_segments comparison is ``test_tutorial_02_03_gpu.py``'s.)

    python3 -m pytest -m gpu tests/gpu/test_tutorial_room_gpu.py -x -q

Each plan is made in a fresh Python process (a kernel makes its plan once), beside a neighbour
process that holds part of the GPU, or under a per-process cap. Writes ``tutorial_room_gpu.json``
to ``$JUPYTER_GPU_OUT`` when set. About a minute on one H200 (every process starts CUDA).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.outputs import write_json

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.gpu
GiB = 2**30
FIGURES: dict[str, object] = {}

PLAN = """
import json, torch
{before}
from jupyter_gpu.tutorials.session import current_plan
plan = current_plan()
print(json.dumps({{**plan.as_dict(), "total_bytes": plan.total_bytes}}))
"""

HOLD = """
import sys, torch
free, total = torch.cuda.mem_get_info()
held = torch.empty(int({share} * total), dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print(held.numel(), flush=True)
sys.stdin.readline()
"""


def env(**extra: str) -> dict[str, str]:
    base = {
        k: v for k, v in os.environ.items() if k not in ("JUPYTER_GPU_TIER", "JUPYTER_GPU_SMOKE")
    }
    base["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**base, **extra}


def plan_in_fresh_process(before: str = "", **extra: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PLAN.format(before=before)],
        env=env(**extra),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    plan: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return plan


@pytest.fixture
def neighbour(request: pytest.FixtureRequest) -> Iterator[int]:
    """A process that holds ``request.param`` of GPU 0's memory until the test ends; its bytes."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD.format(share=request.param)],
        env=env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    nbytes = int(holder.stdout.readline().strip())
    try:
        yield nbytes
    finally:
        holder.communicate("\n", timeout=60)


def test_alone_the_tier_is_the_cards() -> None:
    plan = plan_in_fresh_process()
    FIGURES["alone"] = plan
    total = int(plan["total_bytes"])  # type: ignore[call-overload]
    expected = "80gb" if total >= 72 * GiB else None
    if expected:
        assert plan["tier"] == expected


@pytest.mark.parametrize("neighbour", [0.72, 0.88], indirect=True, ids=["most", "nearly-all"])
def test_beside_a_neighbour_the_tier_is_smaller(neighbour: int) -> None:
    plan = plan_in_fresh_process()
    FIGURES[f"beside_{neighbour / GiB:.0f}_gib"] = plan
    total = int(plan["total_bytes"])  # type: ignore[call-overload]
    usable = int(plan["usable_bytes"])  # type: ignore[call-overload]
    assert usable <= total - neighbour, "the neighbour's memory is not this process's"
    alone = FIGURES.get("alone") or plan_in_fresh_process()
    order = ["16gb", "24gb", "40gb", "80gb"]
    assert order.index(str(plan["tier"])) <= order.index(str(alone["tier"]))  # type: ignore[index]
    if total - neighbour < 20 * GiB:
        assert plan["tier"] == "16gb"


def test_a_per_process_cap_sets_the_tier() -> None:
    capped = plan_in_fresh_process("torch.cuda.set_per_process_memory_fraction(0.2)")
    FIGURES["set_per_process_memory_fraction_0.2"] = capped
    assert capped["fraction"] == pytest.approx(0.2)
    usable = int(capped["usable_bytes"])  # type: ignore[call-overload]
    total = int(capped["total_bytes"])  # type: ignore[call-overload]
    assert usable == pytest.approx(0.2 * total, rel=0.01)
    # The spawner's way: torch's allocator reads the fraction from the environment, where it can.
    by_env = plan_in_fresh_process(PYTORCH_CUDA_ALLOC_CONF="per_process_memory_fraction:0.2")
    FIGURES["PYTORCH_CUDA_ALLOC_CONF_fraction_0.2"] = by_env
    FIGURES["torch_reads_the_fraction_from_the_environment"] = by_env["fraction"] != 1.0
    if by_env["fraction"] == 1.0:
        pytest.skip("this torch does not read per_process_memory_fraction from the environment")
    assert by_env["tier"] == capped["tier"]


@pytest.fixture(scope="module", autouse=True)
def write_figures() -> Iterator[None]:
    yield
    print(json.dumps(FIGURES, indent=1))
    write_json("tutorial_room_gpu.json", FIGURES, indent=1)
