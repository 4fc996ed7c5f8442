"""Notebooks 04-06's exercise checks and GPU pipeline on a real GPU (about a minute on an H200).

    python3 -m pytest -m gpu tests/gpu/test_tutorial_checks_gpu.py -x -q

1. 04's top-kernel check on a real CUDA profile of the notebook's training step: every range
   (``record_function``, ``is_user_annotation``) is rejected, the top kernel is accepted, and it
   is a kernel the profiler recorded on the GPU.
2. 04's batch augmentation on the GPU samples the same grid as on the CPU; its cost per batch.
3. 06's recompile check with inductor on the GPU: the unchanged module and ``dynamic=True``
   rejected, the step in a buffer accepted.
4. 05's FSDP check with NCCL on every GPU (two or more): the unsharded start rejected, the
   solution accepted.

Figures go to ``$JUPYTER_GPU_OUT/tutorial_checks_gpu.json`` (or ``$OUT``) when set.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu


def test_top_kernel_check_on_a_real_cuda_profile(figures: dict[str, Any]) -> None:
    import torch
    import torch.nn.functional as F
    from torch.autograd import DeviceType  # type: ignore[attr-defined]  # not in __all__
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    from jupyter_gpu.tutorials.checks_04 import check_top_kernel, top_kernel
    from jupyter_gpu.tutorials.digits import DigitsCNN

    torch.manual_seed(0)
    model = DigitsCNN(32).cuda().to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # torch's stub lacks it
    opt = torch.optim.AdamW(model.parameters(), fused=True)
    x = torch.randn(256, 1, 64, 64).pin_memory()
    y = torch.randint(0, 10, (256,)).pin_memory()

    def step() -> None:
        xd = x.to("cuda", non_blocking=True).to(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(xd), y.to("cuda", non_blocking=True))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=3)) as prof:
        for _ in range(5):
            with record_function("train step"):
                step()
            prof.step()
    averages = list(prof.key_averages())
    annotations = {e.key for e in averages if e.is_user_annotation}
    assert "train step" in annotations
    for name in annotations:
        assert not check_top_kernel(averages, name, gpu=True), name
    top = top_kernel(averages, gpu=True)
    kernels = {
        e.name
        for e in prof.events()
        if e.device_type == DeviceType.CUDA and not e.is_user_annotation
    }
    assert top.key in kernels
    assert not top.key.startswith(("Memcpy", "Memset"))
    assert check_top_kernel(averages, top.key, gpu=True)
    naive = max(averages, key=lambda e: e.self_device_time_total)
    figures["top_kernel"] = {
        "top_kernel": top.key,
        "top_kernel_self_gpu_ms": top.self_device_time_total / 1e3,
        "naive_top": naive.key,
        "naive_top_is_annotation": bool(naive.is_user_annotation),
    }


def test_batch_augmentation_on_the_gpu_matches_the_cpu(figures: dict[str, Any]) -> None:
    import torch

    from jupyter_gpu.tutorials.digits import load_digits_splits
    from jupyter_gpu.tutorials.pipeline import augment_on_device, resample

    train, _ = load_digits_splits()
    images = torch.from_numpy(train.images[:256])[:, None]
    angle = torch.linspace(-0.25, 0.25, 256)
    scale = torch.linspace(0.85, 1.15, 256)
    shift = torch.stack([torch.linspace(-0.7, 0.7, 256), torch.linspace(0.7, -0.7, 256)], 1)
    on_cpu = resample(images, 64, angle, scale, shift)
    on_gpu = resample(images.cuda(), 64, angle.cuda(), scale.cuda(), shift.cuda())
    assert torch.allclose(on_gpu.cpu(), on_cpu, atol=1e-5)
    batch = images.cuda()
    for _ in range(3):
        augment_on_device(batch, 64)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(100):
        augment_on_device(batch, 64)
    torch.cuda.synchronize()
    per_batch = (time.perf_counter() - start) / 100
    figures["augment_on_device"] = {"batch": 256, "size": 64, "ms_per_batch": per_batch * 1e3}
    assert per_batch < 0.01  # a few kernels, not 256 images of NumPy (0.5 ms each on the CPU)


def test_recompile_check_with_inductor_on_the_gpu(figures: dict[str, Any]) -> None:
    import torch

    from jupyter_gpu.tutorials.checks_06 import WarmupScale, check_recompile_fix
    from tests.tutorial_solutions import WarmupScaleTensor

    x = torch.randn(32, 1024, device="cuda")
    start = time.perf_counter()
    model = WarmupScale(1024).cuda()
    starter = check_recompile_fix(model, torch.compile(model), x)
    model = WarmupScale(1024).cuda()
    dynamic = check_recompile_fix(model, torch.compile(model, dynamic=True), x)
    model = WarmupScaleTensor(1024).cuda()
    fixed = check_recompile_fix(model, torch.compile(model), x)
    figures["recompile_check"] = {
        "starter": str(starter),
        "dynamic_true": str(dynamic),
        "buffer": str(fixed),
        "seconds": time.perf_counter() - start,
    }
    assert not starter
    assert not dynamic
    assert fixed


def test_fsdp_check_with_nccl_on_every_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, figures: dict[str, Any]
) -> None:
    import torch

    from jupyter_gpu.tutorials.checks_05 import check_fsdp_module

    monkeypatch.chdir(tmp_path)  # the ranks start here and import the modules written here
    (tmp_path / "gpu_starter.py").write_text(
        "def shard(model, mesh):\n    return model\n\n\n"
        "def rank_bytes(model):\n"
        "    return sum(p.numel() * p.element_size() for p in model.parameters())\n"
    )
    (tmp_path / "gpu_solution.py").write_text(
        "from torch.distributed.fsdp import fully_shard\n\n\n"
        "def shard(model, mesh):\n"
        "    for layer in model:\n        fully_shard(layer, mesh=mesh)\n"
        "    fully_shard(model, mesh=mesh)\n    return model\n\n\n"
        "def rank_bytes(model):\n"
        "    return sum(p.to_local().numel() * p.element_size() for p in model.parameters())\n"
    )
    world = torch.cuda.device_count()
    if world < 2:  # one rank cannot tell a shard from the whole model (notebook 05 uses gloo)
        pytest.skip("one GPU: the FSDP check needs two ranks; notebook 05 runs them with gloo")
    start = time.perf_counter()
    starter = check_fsdp_module("gpu_starter", world=world, backend="nccl", width=2048)
    solved = check_fsdp_module("gpu_solution", world=world, backend="nccl", width=2048)
    figures["fsdp_check"] = {
        "world": world,
        "starter": str(starter),
        "solution": str(solved),
        "seconds": time.perf_counter() - start,
    }
    assert not starter
    assert "not sharded" in starter.message
    assert solved
