"""Measure the digits classifier's training throughput under a slow and a fixed input pipeline.

The data is scikit-learn's bundled digits, upscaled one image at a time with random jitter
(jupyter_gpu/tutorials/digits.py: about 0.2 ms of CPU per 64x64 image). Pipelines:

- slow: ``num_workers=0`` (augmentation in the training process), pageable memory, blocking
  host-to-device copies;
- workers: ``num_workers=W``;
- fixed: ``num_workers=W``, ``pin_memory=True``, ``.to(device, non_blocking=True)``;
- gpu-only: one batch kept on the GPU, reused (the model's own ceiling, no input pipeline).

Throughput is images/s over windows of --batches steps after --warmup steps (worker start-up
included in the warm-up), the median of --windows windows, with the GPU synchronised at each
window's ends. Target on one H200: fixed >= 2x slow.

    python benchmarks/input_pipeline.py            # about a minute on an H200
    python benchmarks/input_pipeline.py --device cpu --batches 3 --windows 2   # dry run

Writes a JSON copy to $OUT/input_pipeline.json when OUT is set (or --json PATH).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a source tree without installing the package

import torch  # noqa: E402 (after the path set-up above)

from jupyter_gpu.tutorials.digits import (  # noqa: E402 (as above)
    AugmentedDigits,
    DigitsCNN,
    digits_loader,
    load_digits_splits,
)
from jupyter_gpu.tutorials.timing import synchronize  # noqa: E402 (as above)

TARGET_FIXED_OVER_SLOW = 2.0


def endless(loader: torch.utils.data.DataLoader) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    while True:
        yield from loader


def measure(name: str, args: argparse.Namespace, workers: int, pin: bool, gpu_only: bool) -> dict:
    device = torch.device(args.device)
    torch.manual_seed(0)
    train, _ = load_digits_splits()
    dataset = AugmentedDigits(train, args.size, length=args.batch * 10_000)
    loader = digits_loader(dataset, args.batch, workers=workers, pin_memory=pin)
    model = DigitsCNN(args.width).to(device, memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=device.type == "cuda")
    dtype = torch.bfloat16
    batches = endless(loader)
    fixed_batch = next(batches)
    non_blocking = pin

    def step() -> torch.Tensor:
        if gpu_only:
            x, y = fixed_batch
        else:
            x, y = next(batches)
        x = x.to(device, non_blocking=non_blocking).to(memory_format=torch.channels_last)
        y = y.to(device, non_blocking=non_blocking)
        with torch.autocast(device.type, dtype=dtype):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    if gpu_only:
        fixed_batch = (fixed_batch[0].to(device), fixed_batch[1].to(device))
    start = time.perf_counter()
    for _ in range(args.warmup):
        step()
    synchronize(device)
    warmup_s = time.perf_counter() - start
    rates = []
    for _ in range(args.windows):
        synchronize(device)
        start = time.perf_counter()
        for _ in range(args.batches):
            loss = step()
        synchronize(device)
        rates.append(args.batches * args.batch / (time.perf_counter() - start))
    return {
        "pipeline": name,
        "workers": workers,
        "pin_memory": pin,
        "images_per_s": statistics.median(rates),
        "min_images_per_s": min(rates),
        "windows": args.windows,
        "batches_per_window": args.batches,
        "warmup_s": warmup_s,
        "loss": float(loss.detach()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--size", type=int, default=64, help="image side in pixels")
    parser.add_argument("--width", type=int, default=32, help="CNN width (first stage channels)")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--workers", type=int, help="default: min(8, CPUs - 2)")
    parser.add_argument("--batches", type=int, default=20, help="steps per timed window")
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cpus = len(os.sched_getaffinity(0))
    workers = args.workers if args.workers is not None else max(1, min(8, cpus - 2))
    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else "none (CPU)"
    print(
        f"GPU: {gpu}; torch {torch.__version__}; {cpus} CPUs; images {args.size}px, "
        f"batch {args.batch}, CNN width {args.width}; {time.strftime('%Y-%m-%d %H:%M')}",
        flush=True,
    )
    begin = time.perf_counter()
    plans = [
        ("slow", 0, False, False),
        ("workers", workers, False, False),
        ("fixed", workers, True, False),
        ("gpu-only", 0, False, True),
    ]
    rows = []
    for name, w, pin, gpu_only in plans:
        row = measure(name, args, w, pin and args.device == "cuda", gpu_only)
        rows.append(row)
        print(
            f"  {name:9s} workers {w}  pin {row['pin_memory']!s:5s} "
            f"{row['images_per_s']:10,.0f} images/s (min {row['min_images_per_s']:,.0f})",
            flush=True,
        )
    by = {r["pipeline"]: r for r in rows}
    ratio = by["fixed"]["images_per_s"] / by["slow"]["images_per_s"]
    ceiling = by["fixed"]["images_per_s"] / by["gpu-only"]["images_per_s"]
    print("\npipeline | workers | pin_memory | images/s | windows x batches")
    print("--- | --- | --- | --- | ---")
    for r in rows:
        print(
            f"{r['pipeline']} | {r['workers']} | {r['pin_memory']} | {r['images_per_s']:,.0f} | "
            f"{r['windows']} x {r['batches_per_window']}"
        )
    met = "yes" if ratio >= TARGET_FIXED_OVER_SLOW else "NO"
    print(
        f"\nfixed / slow = {ratio:.2f}x (target >= {TARGET_FIXED_OVER_SLOW}x: {met}); "
        f"fixed reaches {ceiling:.0%} of the GPU-only ceiling"
    )
    print(f"took {time.perf_counter() - begin:.0f} s")
    out = args.json or (
        Path(os.environ["OUT"]) / "input_pipeline.json" if os.environ.get("OUT") else None
    )
    if out:
        out.write_text(
            json.dumps(
                {
                    "gpu": gpu,
                    "torch": torch.__version__,
                    "date": time.strftime("%Y-%m-%d"),
                    "cpus": cpus,
                    "args": vars(args) | {"json": None},
                    "rows": rows,
                    "fixed_over_slow": ratio,
                    "target": TARGET_FIXED_OVER_SLOW,
                },
                indent=1,
            )
        )
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
