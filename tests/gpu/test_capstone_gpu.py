"""On a real NVIDIA GPU: the capstone's GPU-only pieces, small and quick, before the notebook runs.

    python3 -m pytest -m gpu tests/gpu/test_capstone_gpu.py -x -q

Checks what CPU runs cannot (figures go to ``$JUPYTER_GPU_OUT/capstone_gpu.json`` when set):

- the bf16 matmul ceiling is measured, and TF32 is put back as it was;
- ``scaled_dot_product_attention`` runs a flash (or another fused) kernel for heads of 100 (the
  student's) and 128, and the profile reader names it;
- a batch fitted from one eager trial step fits: the compiled step at that batch peaks within the
  budget, and near the prediction;
- fused AdamW with a GradScaler (fp16) makes no host synchronisation in a step, the foreach
  Adam makes one (GradScaler reads ``found_inf``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

pytestmark = pytest.mark.gpu
FIGURES: dict[str, Any] = {}


@pytest.fixture(scope="module", autouse=True)
def _write_figures() -> Any:
    yield
    out = os.environ.get("JUPYTER_GPU_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "capstone_gpu.json").write_text(json.dumps(FIGURES, indent=1) + "\n")


def test_format_rates_and_tf32_restored() -> None:
    from jupyter_gpu.magics.common.precision import tf32_enabled
    from jupyter_gpu.tutorials.capstone.steps import format_matmul_rate

    before = tf32_enabled()
    bf16 = format_matmul_rate("bf16", device="cuda")
    tf32 = format_matmul_rate("tf32", device="cuda", size=4096)
    fp32 = format_matmul_rate("fp32", device="cuda", size=4096)
    assert tf32_enabled() == before
    FIGURES["matmul_rate_bf16_tflops"] = bf16.tflops
    FIGURES["matmul_rate_tf32_tflops"] = tf32.tflops
    FIGURES["matmul_rate_fp32_tflops"] = fp32.tflops
    assert all(r.sustained for r in (bf16, tf32, fp32))
    assert bf16.tflops > tf32.tflops > fp32.tflops > 10  # TF32 on only where asked


@pytest.mark.parametrize("head_dim", [100, 128])
def test_sdpa_runs_a_fused_kernel(head_dim: int) -> None:
    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    from jupyter_gpu.tutorials.capstone.profiles import kernel_kind

    q, k, v = (
        torch.randn(2, 4, 1024, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        for _ in range(3)
    )
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
        torch.cuda.synchronize()
    names = [e.key for e in prof.key_averages() if kernel_kind(e.key) == "attention"]
    FIGURES[f"attention_kernels_head_{head_dim}"] = names
    assert names, "no fused attention kernel ran"


def test_batch_fitted_from_an_eager_trial_fits_the_compiled_step() -> None:
    import torch

    from jupyter_gpu.tutorials.capstone.fit import fit_batch, gradient_bytes, memory_budget
    from jupyter_gpu.tutorials.capstone.model import CapstoneGPT
    from jupyter_gpu.tutorials.capstone.shapes import final_shape_from_spec

    shape = final_shape_from_spec("d1024-hd128-l4-t1024")
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = CapstoneGPT(shape, sdpa=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    budget = 12 * 2**30  # as if the GPU had 12 GiB for this process

    def step(batch: int) -> None:
        x = torch.randint(0, 256, (batch, shape.seq_len), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, x)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def peak(batch: int) -> int:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        step(batch)
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated()

    step(2)  # the optimizer's state exists from here on
    static = torch.cuda.memory_allocated()
    fit = fit_batch(
        trial_batch=2,
        static_bytes=static,
        trial_peak_bytes=peak(2),
        fixed_bytes=gradient_bytes(model.parameters()),
        budget_bytes=min(budget, memory_budget()),
    )
    model.compile_blocks()
    step(fit.batch)  # compiles
    measured = peak(fit.batch)
    FIGURES["fit"] = {
        "describe": fit.describe(),
        "batch": fit.batch,
        "predicted_peak_gib": fit.predicted_peak_bytes() / 2**30,
        "compiled_peak_gib": measured / 2**30,
    }
    assert fit.batch > 2
    assert measured <= fit.budget_bytes
    assert measured <= fit.predicted_peak_bytes() * 1.15
    torch._dynamo.reset()


@pytest.mark.parametrize(("fused", "syncs"), [(False, 1), (True, 0)])
def test_fp16_scaler_syncs_only_with_the_foreach_optimizer(fused: bool, syncs: int) -> None:
    import torch

    model = torch.nn.Linear(256, 256, device="cuda")
    optimizer = torch.optim.AdamW(model.parameters(), fused=fused or None)
    scaler = torch.amp.GradScaler("cuda")
    x = torch.randn(64, 256, device="cuda")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

    step()
    torch.cuda.synchronize()
    counted = []
    real = torch.Tensor.item

    def counting(self: torch.Tensor) -> Any:
        if self.is_cuda:
            counted.append(1)
        return real(self)

    torch.Tensor.item = counting  # type: ignore[method-assign]  # count GradScaler's reads
    try:
        step()
    finally:
        torch.Tensor.item = real  # type: ignore[method-assign]
    FIGURES[f"scaler_item_calls_fused_{fused}"] = len(counted)
    assert len(counted) == syncs
