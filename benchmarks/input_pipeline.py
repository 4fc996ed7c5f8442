"""Measure the digits classifier's training throughput under a slow and a fixed input pipeline.

The data is scikit-learn's bundled digits, upscaled one image at a time with random jitter
(jupyter_gpu/tutorials/digits.py: about 0.2 ms of CPU per 64x64 image). Pipelines:

- slow: ``num_workers=0`` (augmentation in the training process), pageable memory, blocking
  host-to-device copies;
- workers: ``num_workers=W``;
- fixed: ``num_workers=W``, ``pin_memory=True``, ``.to(device, non_blocking=True)``;
- gpu-only: one batch kept on the device, reused (the model's own ceiling, no input pipeline).

They are timed with the one timing method, as notebook 04 times them
(``jupyter_gpu.tutorials.pipeline_timing.compare_pipelines``): --rounds interleaved rounds, each
timing one block of every pipeline (its workers started before the block and stopped after, so
no pipeline is served from a queue filled while another was timed), the order reversed every
other round; a ratio is the median of the rounds' paired ratios with its interval. A block is
--waves waves of the workers (a batch per worker each), or --batches steps without workers.
Target on one H200: fixed >= 2x slow, met only where the ratio's interval's low end reaches it.

    python benchmarks/input_pipeline.py            # on a GPU (not yet timed there in rounds)
    python benchmarks/input_pipeline.py --device cpu --batches 2 --waves 1 --rounds 3  # dry run

Writes a JSON copy to $JUPYTER_GPU_OUT (else $OUT)/input_pipeline.json when set (or --json PATH).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a source tree without installing the package

import torch  # noqa: E402 (after the path set-up above)

from benchmarks.outputs import write_json  # noqa: E402 (after the path set-up)
from jupyter_gpu.tutorials.digits import (  # noqa: E402 (as above)
    AugmentedDigits,
    DigitsCNN,
    digits_loader,
    load_digits_splits,
)
from jupyter_gpu.tutorials.pipeline_timing import (  # noqa: E402 (as above)
    FreshBatches,
    PipelineVariant,
    compare_pipelines,
    waves,
)

TARGET_FIXED_OVER_SLOW = 2.0


def variants(args: argparse.Namespace, workers: int) -> dict[str, PipelineVariant]:
    """The four pipelines, each one training step of the same model from the same start."""
    device = torch.device(args.device)
    torch.manual_seed(0)
    train, _ = load_digits_splits()
    dataset = AugmentedDigits(train, args.size, length=args.batch * 10_000)
    model = DigitsCNN(args.width).to(device, memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=device.type == "cuda")
    pin = device.type == "cuda"

    def step(batches: Iterator[tuple[torch.Tensor, torch.Tensor]], non_blocking: bool) -> None:
        x, y = next(batches)
        x = x.to(device, non_blocking=non_blocking).to(memory_format=torch.channels_last)
        y = y.to(device, non_blocking=non_blocking)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def loader(w: int, pinned: bool) -> PipelineVariant:
        batches = FreshBatches(
            digits_loader(
                dataset, args.batch, workers=w, pin_memory=pinned, persistent_workers=False
            )
        )
        per_block = waves(w, args.waves) if w else args.batches
        return PipelineVariant(lambda: step(batches, pinned), per_block, batches.started)

    x, y = next(iter(digits_loader(dataset, args.batch)))
    same = itertools.repeat((x.to(device), y.to(device)))  # one batch on the device, reused
    return {
        "slow": loader(0, False),
        "workers": loader(workers, False),
        "fixed": loader(workers, pin),
        "gpu-only": PipelineVariant(lambda: step(same, False), args.batches),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--size", type=int, default=64, help="image side in pixels")
    parser.add_argument("--width", type=int, default=32, help="CNN width (first stage channels)")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--workers", type=int, help="default: min(8, CPUs - 2)")
    parser.add_argument("--batches", type=int, default=20, help="steps a block, without workers")
    parser.add_argument("--waves", type=int, default=3, help="waves of the workers a block")
    parser.add_argument("--rounds", type=int, default=12, help="interleaved rounds")
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
    timed = compare_pipelines(
        variants(args, workers), device=torch.device(args.device), rounds=args.rounds
    )
    rows = [
        {
            "pipeline": name,
            "workers": 0 if name in ("slow", "gpu-only") else workers,
            "pin_memory": name == "fixed" and args.device == "cuda",
            "images_per_s": timing.rate(args.batch),
            "steps_per_block": timing.calls_per_run,
            "against_slow": None if name == "slow" else timed.ratio(name).describe(),
        }
        for name, timing in timed.timings.items()
    ]
    gain = timed.ratio("fixed")
    ceiling = timed.ratio("fixed", baseline="gpu-only")
    print("\npipeline | workers | pin_memory | images/s | against slow")
    print("--- | --- | --- | --- | ---")
    for r in rows:
        print(
            f"{r['pipeline']} | {r['workers']} | {r['pin_memory']} | {r['images_per_s']:,.0f} | "
            f"{r['against_slow'] or 'the baseline'}"
        )
    met = gain.low >= TARGET_FIXED_OVER_SLOW  # on the interval's low end, as a claim holds
    print(
        f"\nfixed against slow: {gain.describe()} (target >= {TARGET_FIXED_OVER_SLOW}x, on the "
        f"interval's low end: {'yes' if met else 'NO'}); fixed against the GPU-only ceiling: "
        f"{ceiling.describe()}"
    )
    print(timed.method())
    print(f"took {time.perf_counter() - begin:.0f} s")
    out = write_json(
        "input_pipeline.json",
        {
            "gpu": gpu,
            "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d"),
            "cpus": cpus,
            "args": vars(args) | {"json": None},
            "rows": rows,
            "fixed_over_slow": gain.value,
            "fixed_over_slow_interval": [gain.low, gain.high],
            "interval_level": gain.level,
            "rounds": gain.rounds,
            "target": TARGET_FIXED_OVER_SLOW,
            "met": met,
        },
        indent=1,
        path=args.json,
    )
    if out:
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
