"""Notebook 04's training phases under several numeric set-ups, with BatchNorm and GradScaler stats.

    python3 benchmarks/digits_fp16_batchnorm.py                # on a GPU: fp16, fp16-nativebn, bf16
    python3 benchmarks/digits_fp16_batchnorm.py --configs all  # every set-up below
    python3 benchmarks/digits_fp16_batchnorm.py --device cpu --width 16 --size 32 --batch 64 \\
        --configs fp32

Trains ``DigitsCNN`` through the sequence of phases notebook 04 runs on a GPU (its gpu picks:
width 32, 64x64 images, batch 256; the step counts of its cells, times ``--scale``): CPU-augmented
batches (cells 8-19 and the exercise, 36), one batch reused (24, 28), raw batches augmented on the
device (26-27, 32, 38). After each phase one row: the mean training loss of its last 10 steps, the
GradScaler's scale and the steps it skipped so far, non-finite BatchNorm inputs, the largest
|BN input|, the worst error of a BN running-statistics update against the batch it came from (the
larger of the implied batch mean's error in batch standard deviations and the implied batch
variance's relative error, implied = ``(new - (1 - m) old) / m``, against the batch's own fp32
statistics), then validation loss and accuracy in eval mode and fp32, as the notebook measures
them: "clean" on noise-free validation digits (the notebook before the fix), "recal" the same
with the BN running stats recomputed from the noise-free training digits (what the weights are
worth for clean digits), "aug" on the validation digits with the training jitter and noise
(``augmented_tensor(val_split, size, seed=0)``: the notebook after the fix). A last table
compares the set-ups and says whether cell 38's check passes on each validation set.

Set-ups: fp16 (autocast fp16 + GradScaler, as the 16gb tier), fp16-nativebn (the same with
BatchNorm kept off cuDNN: on CUDA torch sends fp16 and fp32 BatchNorm to cuDNN, in its
SPATIAL_PERSISTENT mode for channels_last training, and bf16 to its own kernels), fp16-nchw
(no channels_last: cuDNN's SPATIAL mode), fp16-unfused (AdamW without fused=True), bf16 (the full
size tier), fp32.

Needs ``jupyter_gpu.tutorials.digits.augmented_tensor`` (the fix's commit). On one H200 a set-up
should take about 20 s (1,475 steps at ~11 ms, CPU-augmented phases from 8 DataLoader workers):
the default three about a minute; ``--scale 0.5`` halves it.

Reading it: CPU runs at full size in bf16 found, after the first phase, "clean" swinging from
phase to phase between 46% and 97% while "recal" stayed at 96-99% and "aug" at 73-97%; no
skipped steps and no non-finite values (fp16 on a CPU at width 16, 32x32, batch 64).
If fp16 on the GPU shows the same (clean fails, recal high, aug passes), that is its cause too.
If fp16's recal is low as well, its weights are worse (compare fp16-nativebn: cuDNN's BatchNorm);
an rs err above ~1e-2 says a running-statistics update did not match its batch.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.nn.functional as F
from torch import nn

from jupyter_gpu.tutorials.capstone.data import endless
from jupyter_gpu.tutorials.digits import (
    AugmentedDigits,
    DigitsCNN,
    augmented_tensor,
    digits_loader,
    load_digits_splits,
    upscaled_tensor,
)
from jupyter_gpu.tutorials.pipeline import RawDigitBatches, augment_on_device

CONFIGS = {  # name: (autocast dtype, GradScaler, channels_last, BN on cuDNN allowed, fused)
    "fp16": (torch.float16, True, True, True, None),
    "fp16-nativebn": (torch.float16, True, True, False, None),
    "fp16-nchw": (torch.float16, True, False, True, None),
    "fp16-unfused": (torch.float16, True, True, True, False),
    "bf16": (torch.bfloat16, False, True, True, None),
    "fp32": (None, False, True, True, None),
}
# (label, source, steps): the notebook's cells with gpu=True (pinned and blocking phases run).
PHASES = [
    ("slow (cells 8-12)", "cpu-aug", 135),
    ("workers+pinned (18-19)", "cpu-aug", 230),
    ("one batch (24)", "one", 110),
    ("on-device aug (26-27)", "raw", 120),
    ("one batch (28)", "one", 10),
    ("blocking (32)", "raw", 120),
    ("exercise (36)", "cpu-aug", 550),
    ("final (38)", "raw", 200),
]


def native_bn(bn: nn.BatchNorm2d) -> None:
    """Run ``bn`` with cuDNN disabled (torch's own kernels; its backward follows the forward)."""
    forward = bn.forward

    def without_cudnn(x):
        c = torch.backends.cudnn
        with c.flags(
            enabled=False,
            benchmark=c.benchmark,
            deterministic=c.deterministic,
            allow_tf32=c.allow_tf32,
        ):
            return forward(x)

    bn.forward = without_cudnn


def run(name: str, args: argparse.Namespace, data) -> dict:
    amp, scaled, channels_last, cudnn_bn, fused = CONFIGS[name]
    device = args.device
    train_split, dataset, val_x, val_y, aug_x, clean_train_x = data
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    torch.manual_seed(0)
    model = DigitsCNN(args.width).to(device, memory_format=fmt)
    fused = (device == "cuda") if fused is None else fused
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, fused=fused)
    scaler = torch.amp.GradScaler(device, enabled=scaled)
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    if not cudnn_bn:
        for bn in bns:
            native_bn(bn)
    stats = {
        "bad": torch.zeros((), device=device),
        "in_max": torch.zeros((), device=device),
        "rs_err": torch.zeros((), device=device),
    }

    def before(bn, _inputs):
        if bn.training:
            bn._old = (bn.running_mean.clone(), bn.running_var.clone())

    def after(bn, inputs, _out):
        if not bn.training or not torch.is_grad_enabled():
            return
        x = inputs[0].detach().float()
        stats["bad"] += (~torch.isfinite(x)).any()
        stats["in_max"] = torch.maximum(stats["in_max"], x.abs().nan_to_num(posinf=7e4).max())
        m = bn.momentum
        old_m, old_v = bn._old
        var = x.var(dim=(0, 2, 3), unbiased=True)
        implied_v = (bn.running_var - (1 - m) * old_v) / m
        implied_m = (bn.running_mean - (1 - m) * old_m) / m
        err = torch.maximum(
            ((implied_v - var).abs() / var.clamp_min(1e-6)).max(),
            ((implied_m - x.mean(dim=(0, 2, 3))).abs() / var.clamp_min(1e-6).sqrt()).max(),
        )
        stats["rs_err"] = torch.maximum(stats["rs_err"], err.nan_to_num(nan=1e9))

    for bn in bns:
        bn.register_forward_pre_hook(before)
        bn.register_forward_hook(after)

    counts = {"steps": 0, "skipped": 0}

    def step(x, y):
        x = x.to(device, non_blocking=True).to(memory_format=fmt)
        y = y.to(device, non_blocking=True)
        with torch.autocast(device, dtype=amp or torch.float32, enabled=amp is not None):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scale = scaler.get_scale() if scaled else 1.0
        scaler.step(optimizer)
        scaler.update()
        if scaled and scaler.get_scale() < scale:
            counts["skipped"] += 1
        optimizer.zero_grad(set_to_none=True)
        counts["steps"] += 1
        return loss.detach()

    @torch.no_grad()
    def evaluate(m, x=val_x):
        m.eval()
        logits = m(x).float()
        m.train()
        return F.cross_entropy(logits, val_y).item(), (
            logits.argmax(1) == val_y
        ).float().mean().item()

    raw = RawDigitBatches(train_split, args.batch, pin=device == "cuda")

    def raw_aug():
        while True:
            x, y = next(raw)
            yield augment_on_device(x.to(device, non_blocking=True), args.size), y

    @torch.no_grad()
    def recalibrated():
        fresh = DigitsCNN(args.width).to(device, memory_format=fmt)
        fresh.load_state_dict(model.state_dict())
        for bn in fresh.modules():
            if isinstance(bn, nn.BatchNorm2d):
                bn.reset_running_stats()
                bn.momentum = None  # a plain average over the batches below
        fresh.train()
        for x in clean_train_x.split(args.batch):
            fresh(x.to(memory_format=fmt))
        return evaluate(fresh)

    workers = 0 if device == "cpu" else min(8, max(1, (os.cpu_count() or 2) - 1))
    loader = digits_loader(dataset, args.batch, workers=workers, pin_memory=device == "cuda")
    cpu_aug = endless(loader)
    one = next(cpu_aug)
    sources = {"cpu-aug": cpu_aug, "raw": raw_aug(), "one": None}
    l0, a0 = evaluate(model)
    initial_aug = evaluate(model, aug_x)
    print(
        f"\n== {name}: device={device} width={args.width} size={args.size} batch={args.batch} "
        f"fused={fused}; initial val loss {l0:.3f}, accuracy {a0:.1%}"
    )
    print(
        f"{'phase':24s} {'steps':>5s} {'train':>6s} {'scale':>7s} {'skip':>4s} {'nonfin':>6s} "
        f"{'|BN in|':>7s} {'rs err':>8s} {'clean':>6s} {'acc':>6s} {'recal':>6s} {'acc':>6s} "
        f"{'aug':>6s} {'acc':>6s}"
    )
    start = time.perf_counter()
    for label, source, n in PHASES:
        src = sources[source]
        losses = [
            step(*(one if src is None else next(src))) for _ in range(max(1, round(n * args.scale)))
        ]
        vl, va = evaluate(model)
        rl, ra = recalibrated()
        al, aa = evaluate(model, aug_x)
        print(
            f"{label:24s} {counts['steps']:5d} {float(torch.stack(losses[-10:]).mean()):6.3f} "
            f"{scaler.get_scale() if scaled else 1:7.0f} {counts['skipped']:4d} "
            f"{int(stats['bad']):6d} {float(stats['in_max']):7.3g} {float(stats['rs_err']):8.2g} "
            f"{vl:6.3f} {va:6.1%} {rl:6.3f} {ra:6.1%} {al:6.3f} {aa:6.1%}",
            flush=True,
        )
        for key in stats:
            stats[key].zero_()
    del loader
    return {
        "val": vl,
        "acc": va,
        "recal": rl,
        "racc": ra,
        "aug": al,
        "aacc": aa,
        "skipped": counts["skipped"],
        "s": time.perf_counter() - start,
        "initial": l0,
        "initial_acc": a0,
        "initial_aug": initial_aug,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--scale", type=float, default=1.0, help="times the notebook's step counts")
    p.add_argument("--configs", default="fp16,fp16-nativebn,bf16", help="comma-separated, or all")
    args = p.parse_args()
    names = list(CONFIGS) if args.configs == "all" else args.configs.split(",")
    if args.device == "cuda":
        print(
            f"{torch.cuda.get_device_name()}, torch {torch.__version__}, "
            f"cuDNN {torch.backends.cudnn.version()}"
        )
    train_split, val_split = load_digits_splits()
    dataset = AugmentedDigits(train_split, args.size, length=args.batch * 1000)
    val_x, val_y = upscaled_tensor(val_split, args.size)
    aug_x, _ = augmented_tensor(val_split, args.size, seed=0)  # the notebook's fixed validation set
    clean_train_x, _ = upscaled_tensor(train_split, args.size)
    dev = args.device
    data = (
        train_split,
        dataset,
        val_x.to(dev),
        val_y.to(dev),
        aug_x.to(dev),
        clean_train_x.to(dev),
    )
    results = {name: run(name, args, data) for name in names}
    print(
        "\nat the end; clean: the old validation set (noise-free digits), aug: the new one "
        "(the same "
        "digits with the training jitter and noise, seed 0); recal: clean, BN stats from clean "
        "training digits; check: cell 38's asserts"
    )
    print(
        f"{'set-up':15s} {'clean loss':>14s} {'acc':>6s} {'check':>5s} {'recal':>6s} {'acc':>6s} "
        f"{'aug loss':>14s} {'acc':>6s} {'check':>5s} {'skipped':>7s} {'s':>4s}"
    )

    def check(loss, acc, initial_loss, initial_acc):
        return "yes" if loss < 0.7 * initial_loss and acc > initial_acc + 0.2 else "NO"

    for name, r in results.items():
        l0, a0 = r["initial_aug"]
        print(
            f"{name:15s} {r['initial']:6.3f} -> {r['val']:5.3f} {r['acc']:6.1%} "
            f"{check(r['val'], r['acc'], r['initial'], r['initial_acc']):>5s} {r['recal']:6.3f} "
            f"{r['racc']:6.1%} {l0:6.3f} -> {r['aug']:5.3f} {r['aacc']:6.1%} "
            f"{check(r['aug'], r['aacc'], l0, a0):>5s} {r['skipped']:7d} {r['s']:4.0f}"
        )


if __name__ == "__main__":
    main()
