"""The capstone's plain PyTorch script, and benchmarks/capstone_probe.py, on a CPU."""

import json
from pathlib import Path
from types import ModuleType

import pytest
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel

from jupyter_gpu.tutorials.capstone import train_script
from jupyter_gpu.tutorials.flops import MODEL_FLOPS_CONVENTION
from tests.helpers import ROOT, load_script

TINY = ["--shape", "d128-hd64-l2-t64", "--batch", "2", "--dtype", "fp32", "--workers", "0"]


@pytest.mark.slow
def test_the_script_trains_and_reports() -> None:
    figures = train_script.main(
        [
            *TINY,
            *("--compile", "default", "--backend", "aot_eager", "--steps", "2", "--warmup", "1"),
            *("--log-every", "1"),
            *("--corpus-bytes", "100000"),
        ]
    )
    assert figures["world_size"] == 1
    assert figures["shape"] == "d128-hd64-l2-t64"
    assert len(figures["losses"]) == 2  # read every step here (--log-every 1)
    assert figures["tokens_per_s"] > 0
    assert figures["tflops_per_gpu"] > 0
    assert figures["dtype"] == "fp32"


def test_compile_options_for_each_mode() -> None:
    from jupyter_gpu.tutorials.capstone.model import GEMM_AUTOTUNE, compile_options

    # one static graph per batch size: the climb runs two sizes side by side
    assert compile_options("default", "inductor") == {"backend": "inductor", "dynamic": False}
    tuned = compile_options(GEMM_AUTOTUNE, "inductor")
    assert tuned["options"]["max_autotune_gemm"]
    assert tuned["options"]["autotune_in_subproc"]
    assert "mode" not in tuned  # torch.compile takes mode or options, not both
    assert compile_options("reduce-overhead", "inductor")["mode"] == "reduce-overhead"
    assert compile_options(GEMM_AUTOTUNE, "aot_eager") == {"backend": "aot_eager", "dynamic": False}


def test_script_arguments() -> None:
    args = train_script.parse_args(["--compile", "max-autotune-gemm"])
    assert args.compile == "max-autotune-gemm"
    with pytest.raises(SystemExit):
        train_script.parse_args(["--compile", "fast"])


@pytest.fixture(scope="module")
def probe() -> ModuleType:
    return load_script(ROOT / "benchmarks" / "capstone_probe.py")


def test_probe_conclusions_name_the_winner(probe: ModuleType) -> None:
    rows = [
        {
            "item": "a",
            "final": True,
            "shape": "d2048-hd128-l8-t2048",
            "compile": "regional default",
            "tflops": 480.0,
            "mfu": 0.6,
            "of_matmul_rate": 0.8,
            "compile_s": 10.0,
            "tokens_per_s": 1.7e5,
            "batch": 32,
        },
        {
            "item": "b",
            "final": True,
            "shape": "d2048-hd128-l8-t2048",
            "compile": "regional max-autotune-no-cudagraphs",
            "tflops": 504.0,
            "mfu": 0.64,
            "of_matmul_rate": 0.84,
            "compile_s": 95.0,
            "tokens_per_s": 1.8e5,
            "batch": 32,
        },
        {
            "item": "s",
            "student_start": True,
            "tflops": 40.0,
            "tokens_per_s": 1.5e4,
            "batch": 16,
            "out_of_memory_at": [32],
        },
    ]
    lines = probe.conclusions({"rows": rows, "skipped": ["x (3 s left)"]}, "bf16 scale")
    assert "JUPYTER_GPU_CAPSTONE_SHAPE=d2048-hd128-l8-t2048" in lines[1]
    assert "504.0 model TFLOP/s" in lines[0]
    # MFU is named against the data-sheet peak, the measured rate apart, the convention stated
    assert "MFU 64% of the data-sheet dense peak, 84% of the matmul rate measured here" in lines[0]
    assert lines[0].endswith(f"model FLOPs: {MODEL_FLOPS_CONVENTION}")
    assert "ceiling" not in " ".join(lines)
    assert any("max-autotune: +5.0%" in line for line in lines)
    assert any("12.0x tokens/s" in line for line in lines)
    assert lines[-1].startswith("skipped for the budget")
    assert "\nb | 32 | 95.0 | 180,000 | 504.0 | 64.0% | 84% |" in probe.table(rows)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_probe_dry_run_on_cpu(probe: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    code = probe.main(
        [
            *("--device", "cpu", "--shapes", "d128-hd64-l2-t64", "--backend", "aot_eager"),
            *("--extras", "student-start", "--budget-s", "600", "--json", str(out), "--keep-cache"),
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    items = [r["item"] for r in report["rows"]]
    assert items == ["candidate d128-hd64-l2-t64", "student start, shape of d128-hd64-l2-t64"]
    assert all("error" not in r for r in report["rows"]), report["rows"]
    assert (
        report["conclusions"][1]
        == "notebook 07 at this shape: JUPYTER_GPU_CAPSTONE_SHAPE=d128-hd64-l2-t64"
    )


class _Fits(torch.nn.Module):
    """A model whose step runs out of memory above ``limit`` sequences, as a GPU would."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.weight = torch.nn.Parameter(torch.ones(3))
        self.sizes: list[int] = []

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.sizes.append(len(x))
        loss = (self.weight.sum() * x.float().mean()) + y.float().mean() * 0
        if len(x) > self.limit:
            raise torch.OutOfMemoryError(
                "CUDA out of memory. Tried to allocate 3.78 GiB. 9.51 GiB is reserved by "
                "PyTorch but unallocated."
            )
        return loss


def test_the_script_steps_its_batch_down_until_a_step_fits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    net = _Fits(limit=70)
    sample = (torch.zeros(90, 4, dtype=torch.long), torch.zeros(90, 4, dtype=torch.long))
    batch = train_script.fitting_batch(
        net, 90, sample, device=torch.device("cpu"), dtype=None, rank=0
    )
    assert batch == 70  # an eighth less each time: 90, 79, 70
    assert net.sizes == [90, 79, 70]
    out = capsys.readouterr().out
    assert "rank 0: batch 90 ran out of memory" in out
    assert "9.51 GiB it could not use" in out
    assert net.weight.grad is None  # the tries leave no gradient for the first real step


def test_each_try_holds_the_optimizer_state_the_first_update_will_create(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    held: list[tuple[int, ...]] = []
    empty_like = torch.empty_like

    def recording_empty_like(t: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        held.append(tuple(t.shape))
        return empty_like(t, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(torch, "empty_like", recording_empty_like)
    params = [torch.zeros(3, 5), torch.zeros(7)]
    sample = (torch.zeros(16, 4, dtype=torch.long), torch.zeros(16, 4, dtype=torch.long))
    train_script.fitting_batch(
        _Fits(limit=12),
        16,
        sample,
        device=torch.device("cpu"),
        dtype=None,
        rank=0,
        moments_of=params,
    )
    # Every try (batches 16, 14 and 13 ran out, 12 fit) holds AdamW's two moments of each
    # parameter, one tensor each as the optimizer makes them: not one block of their bytes.
    assert held == [(3, 5), (3, 5), (7,), (7,)] * 4


def test_only_rank_0_says_it(capsys: pytest.CaptureFixture[str]) -> None:
    sample = (torch.zeros(16, 4, dtype=torch.long), torch.zeros(16, 4, dtype=torch.long))
    train_script.fitting_batch(
        _Fits(limit=12), 16, sample, device=torch.device("cpu"), dtype=None, rank=1
    )
    assert capsys.readouterr().out == ""


@pytest.mark.usefixtures("one_rank")
def test_under_ddp_the_tries_skip_the_all_reduce_and_the_ranks_agree() -> None:
    inner = _Fits(limit=40)
    net = DistributedDataParallel(inner)
    reduced: list[int] = []

    def hook(state: object, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        reduced.append(1)
        return allreduce_hook(None, bucket)  # type: ignore[arg-type]

    net.register_comm_hook(None, hook)
    sample = (torch.zeros(48, 4, dtype=torch.long), torch.zeros(48, 4, dtype=torch.long))
    batch = train_script.fitting_batch(
        net, 48, sample, device=torch.device("cpu"), dtype=None, rank=0
    )
    assert (batch, inner.sizes) == (37, [48, 42, 37])
    assert reduced == []  # no_sync: a rank that ran out of memory leaves none waiting
    assert inner.weight.grad is None
