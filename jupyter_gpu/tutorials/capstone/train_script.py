"""Train the capstone GPT as notebook 07 ends: a plain PyTorch script, one process per GPU.

    python train_capstone.py --shape d2048-hd128-l8-t2048 --batch 24 --steps 50
    torchrun --standalone --nproc-per-node=8 train_capstone.py --batch 24 --steps 50

Everything the notebook measured, in one place: DataLoader workers (the CPU quota shared by the
GPUs) with pinned memory and non-blocking copies; bf16 autocast (fp16 with a GradScaler where
the GPU has no bf16); ``scaled_dot_product_attention`` (``--attention`` pins its kernel, as the
notebook kept it); fused AdamW; each block compiled (regional compilation); FP8 training of the
blocks' matrix products with torchao's float8 when the notebook kept it (``--float8
tensorwise``); no host synchronisation in the loop (the loss is read every ``--log-every``
steps); a shape whose dimensions are multiples of 128. Under ``torchrun`` each rank trains its
own batches and DDP averages the gradients. Rank 0 prints tokens/s and model TFLOP/s per GPU
(model FLOPs: bf16-equivalent, the same count with FP8).

A ``--batch`` that does not fit beside what else holds the GPU (the notebook's kernel that
launched the ranks) steps down by an eighth until a step fits on every rank, and rank 0 says so.

Only the model, the text, the data pipeline and that step-down come from
``jupyter_gpu.tutorials.capstone`` (the same code the notebook runs); the rest is PyTorch.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch
import torch.distributed as dist

from jupyter_gpu.host.cpus import read_cpu_budget
from jupyter_gpu.tutorials.capstone.data import NoisyWindows, endless, worker_loader
from jupyter_gpu.tutorials.capstone.fit import release_cache, settle_batch
from jupyter_gpu.tutorials.capstone.model import GEMM_AUTOTUNE, CapstoneGPT, compile_options
from jupyter_gpu.tutorials.capstone.shapes import ModelShape, final_shape_from_spec
from jupyter_gpu.tutorials.corpus import load_corpus

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module's docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shape", default="d2048-hd128-l8-t2048", help="d<width>-hd<head>-l<layers>-t<seq>"
    )
    parser.add_argument("--batch", type=int, default=8, help="sequences per step per GPU")
    parser.add_argument("--steps", type=int, default=50, help="timed steps (after --warmup)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (the compile)")
    parser.add_argument("--dtype", choices=("auto", *DTYPES), default="auto")
    parser.add_argument("--compile", choices=("none", "default", GEMM_AUTOTUNE), default="default")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend")
    parser.add_argument(
        "--attention",
        choices=("default", "flash", "cudnn", "efficient", "math"),
        default="default",
        help="pin scaled_dot_product_attention to one kernel (default: SDPA picks)",
    )
    parser.add_argument(
        "--float8",
        choices=("none", "tensorwise", "rowwise"),
        default="none",
        help="train the blocks' matrix products in FP8 (torchao's float8)",
    )
    parser.add_argument("--workers", type=int, default=None, help="DataLoader workers per rank")
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--log-every", type=int, default=10, help="read the loss every N steps")
    parser.add_argument("--corpus-bytes", type=int, default=16_000_000)
    return parser.parse_args(argv)


def setup_distributed() -> tuple[int, int, int, torch.device]:
    """``(rank, local_rank, world_size, device)``; joins torchrun's process group if launched by it.

    A process group that is already up (``%%torchrun`` initialises one) is used as it is.
    """
    launched = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local_rank)
    if launched and not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank() if dist.is_initialized() else 0
    world = dist.get_world_size() if dist.is_initialized() else 1
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    return rank, local_rank, world, device


def pick_dtype(name: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype: bf16 where the GPU computes it natively (Ampere on), else fp16."""
    if name != "auto":
        return DTYPES[name]
    if device.type != "cuda":
        return None
    return torch.bfloat16 if torch.cuda.get_device_capability(device)[0] >= 8 else torch.float16


def build(
    shape: ModelShape,
    device: torch.device,
    *,
    lr: float,
    compile_mode: str,
    backend: str,
    attention: str = "default",
    float8: str = "none",
) -> tuple[CapstoneGPT, torch.optim.Optimizer]:
    """The model (SDPA attention, its blocks compiled unless ``compile_mode`` is ``none``), AdamW.

    AdamW is the fused implementation (one kernel per step for all the weights). ``float8``
    (a torchao recipe) converts the blocks' ``nn.Linear`` modules before they are compiled.
    """
    with device:  # parameters made and initialised on the GPU: no copy from the CPU
        model = CapstoneGPT(shape, sdpa=True)
    if attention != "default":
        model.use_attention_backend(attention)
    if float8 != "none":
        # torchao is optional (a wheel on the GPU machine): no stubs where it is not installed
        from torchao.float8 import (  # type: ignore[import-not-found,unused-ignore]
            Float8LinearConfig,
            convert_to_float8_training,
        )

        convert_to_float8_training(
            model.blocks,
            config=Float8LinearConfig.from_recipe_name(float8),
            module_filter_fn=lambda m, _fqn: m.in_features % 16 == 0 and m.out_features % 16 == 0,
        )
    if compile_mode != "none":
        model.compile_blocks(**compile_options(compile_mode, backend))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1, fused=True)
    return model, optimizer


def corpus_text(max_bytes: int) -> bytes:
    """The training text: the standard library's source, as bytes (the validation part left out)."""
    return bytes(load_corpus(max_bytes).train.numpy())


def default_workers() -> int:
    """DataLoader workers per rank: the CPU quota shared by the GPUs, one left free, at most 8.

    The quota (the container's cgroup), not the host's cores: ``jupyter_gpu.host.cpus``.
    """
    cpus = read_cpu_budget().usable
    return max(0, min(8, cpus // max(1, torch.cuda.device_count()) - 1))


def batches(
    shape: ModelShape,
    batch: int,
    *,
    device: torch.device,
    rank: int,
    workers: int | None,
    text: bytes,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """This rank's batches: its own random windows of ``text``, made by worker processes."""
    dataset = NoisyWindows(text, shape.seq_len, length=batch * 1_000_000, seed=rank)
    count = default_workers() if workers is None else workers
    return endless(worker_loader(dataset, batch, workers=count, pin_memory=device.type == "cuda"))


def autocast(device: torch.device, dtype: torch.dtype | None) -> AbstractContextManager[Any]:
    """Autocast to ``dtype`` on ``device``; off for ``None`` (fp32)."""
    return torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None)


def make_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    data: Iterator[tuple[torch.Tensor, torch.Tensor]],
    *,
    device: torch.device,
    dtype: torch.dtype | None,
    scaler: torch.amp.GradScaler,
) -> Callable[[], torch.Tensor]:
    """One training step: copy a batch without waiting, forward under autocast, backward, update.

    Returns the loss as a tensor: reading it (``.item()``) would make the CPU wait for the GPU.
    """

    def step() -> torch.Tensor:
        x, y = next(data)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with autocast(device, dtype):
            loss = model(x, y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        out: torch.Tensor = loss.detach()
        return out

    return step


def all_ranks(ok: bool, device: torch.device) -> bool:
    """Whether ``ok`` holds on every rank (itself without a process group): one all-reduce."""
    if not dist.is_initialized():
        return ok
    flag = torch.tensor([int(ok)], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def fitting_batch(
    net: torch.nn.Module,
    batch: int,
    sample: tuple[torch.Tensor, torch.Tensor],
    *,
    device: torch.device,
    dtype: torch.dtype | None,
    rank: int,
    moments_of: Sequence[torch.Tensor] = (),
) -> int:
    """The first batch from ``batch`` down whose forward and backward fit on every rank.

    The GPU may hold more than this script's work: the notebook that launched the ranks keeps its
    CUDA context and what its allocator could not give back (24.01 GiB on one H200, 2026-12-05,
    where batch 90 then ran out of memory). Each try runs one forward and backward of the first
    ``sample``'s sequences beside two tensors the size of each of ``moments_of`` (AdamW's two
    moments, the optimizer state the first update creates and every later step holds), made one
    per parameter as the optimizer makes them, so that the allocator's blocks are the steps' own
    rather than one block of the same bytes; without the update and, under DDP,
    without the all-reduce (``no_sync``), so that a rank that runs out of memory leaves no other
    waiting in a collective. Then the ranks agree, and a batch that did not fit on one of them
    steps down by an eighth (``settle_batch``; rank 0 prints the line).
    """
    x_all, y_all = (t.to(device) for t in sample)
    no_sync = getattr(net, "no_sync", contextlib.nullcontext)  # DDP's, else nothing to hold back

    def try_batch(size: int) -> None:
        failure, held, loss = "", None, None
        try:
            held = [torch.empty_like(p) for p in moments_of for _moment in range(2)]
            with no_sync():
                with autocast(device, dtype):
                    loss = net(x_all[:size], y_all[:size])
                loss.backward()
        except torch.OutOfMemoryError as error:
            failure = str(error)  # the text only: the error's frames hold the step's tensors
        del held, loss  # before the cache is released below
        net.zero_grad(set_to_none=True)
        if all_ranks(not failure, device):
            return
        release_cache()
        raise torch.OutOfMemoryError(failure or f"batch {size} ran out of memory on another rank")

    def say(line: str) -> None:
        if rank == 0:
            print(f"rank 0: {line}", flush=True)  # noqa: T201 (a script reports)

    return settle_batch(batch, try_batch, say=say)[0]


def train(args: argparse.Namespace) -> dict[str, Any]:
    """Set up, train ``--warmup`` + ``--steps`` steps, and return rank 0's figures."""
    rank, _local_rank, world, device = setup_distributed()
    shape = final_shape_from_spec(args.shape)
    dtype = pick_dtype(args.dtype, device)
    torch.manual_seed(0)  # the same initial weights on every rank
    model, optimizer = build(
        shape,
        device,
        lr=args.lr,
        compile_mode=args.compile,
        backend=args.backend,
        attention=args.attention,
        float8=args.float8,
    )
    net: torch.nn.Module = model
    if dist.is_initialized():
        from torch.nn.parallel import DistributedDataParallel

        net = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    text = corpus_text(args.corpus_bytes)
    data = batches(shape, args.batch, device=device, rank=rank, workers=args.workers, text=text)
    start = time.perf_counter()  # the warm-up's time includes the fitting (the first compile)
    trained = [p for p in model.parameters() if p.requires_grad]  # those AdamW keeps moments of
    batch = fitting_batch(
        net, args.batch, next(data), device=device, dtype=dtype, rank=rank, moments_of=trained
    )
    if batch != args.batch:  # the loader's workers make batches of the size that fits
        data = batches(shape, batch, device=device, rank=rank, workers=args.workers, text=text)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)  # the peak below is the training steps' own
    step = make_step(net, optimizer, data, device=device, dtype=dtype, scaler=scaler)
    for _ in range(args.warmup):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    warmup_s = time.perf_counter() - start
    losses = []
    start = time.perf_counter()
    for i in range(args.steps):
        loss = step()
        if (i + 1) % args.log_every == 0 or i + 1 == args.steps:
            losses.append(loss.item())  # one host sync every --log-every steps
            if rank == 0:
                print(f"step {i + 1}/{args.steps}: loss {losses[-1]:.3f}", flush=True)  # noqa: T201 (a script reports)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    tokens_per_gpu = args.steps * batch * shape.seq_len / seconds
    figures = {
        "shape": shape.spec(),
        "batch": batch,
        "requested_batch": args.batch,
        "world_size": world,
        "dtype": str(dtype).removeprefix("torch.") if dtype else "fp32",
        "float8": args.float8,
        "attention": args.attention,
        "warmup_s": warmup_s,
        "tokens_per_s_per_gpu": tokens_per_gpu,
        "tokens_per_s": tokens_per_gpu * world,
        "tflops_per_gpu": tokens_per_gpu * shape.train_flops_per_token() / 1e12,
        "losses": losses,
        "peak_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
    }
    if rank == 0:
        stepped_down = "" if batch == args.batch else f" ({args.batch} did not fit)"
        print(  # noqa: T201 (a script reports)
            f"{world} rank(s), {shape.spec()}, batch {batch} per rank{stepped_down}: "
            f"{figures['tokens_per_s']:,.0f} tokens/s, {figures['tflops_per_gpu']:.1f} "
            f"model TFLOP/s per GPU (after {args.warmup} warm-up step(s), {warmup_s:.1f} s)",
            flush=True,
        )
    return figures


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv`` (default: the command line) and train."""
    return train(parse_args(argv))


if __name__ == "__main__":
    main()
