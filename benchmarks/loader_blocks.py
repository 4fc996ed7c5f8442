"""Why `%tune`'s fixes on top of a kept input pipeline got wide intervals on a short epoch.

On the H200 (2026-12-04, `tune_targets.py --targets resnet`), every compute fix timed on top of
the kept DataLoader (8 workers) read "no measurable difference" with intervals of about
0.65x to 1.2-2.0x. The loader's epoch was 32 batches, and each epoch's first batch took about
300 ms (the workers refill at the epoch's start) against about 24 ms a batch after it; the
blocks were 0.77 s (four waves of the workers), so a block held a refill or not.

This reproduces that on a CPU with time alone (no GPU, no real work): a step that sleeps, and a
DataLoader whose items sleep (the decode), over a short epoch, drawn from endlessly as `%tune`'s
kept loader is. Two *identical* variants, whose true ratio is 1.0, are compared with
`jupyter_gpu.measure.compare`, repeatedly:

- in blocks of a fixed time (as `%tune` sizes them now), and
- in blocks of a whole epoch (the same number of calls for both: `compare(calls=...)`).

It prints each repeat's ratio and interval, and the widest interval of each way.

    python benchmarks/loader_blocks.py            # about a minute
    python benchmarks/loader_blocks.py --repeats 3 --workers 2
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a source tree without installing the package

import torch  # noqa: E402 (after the path set-up)

from jupyter_gpu.measure import compare  # noqa: E402


class SlowItems(torch.utils.data.Dataset[torch.Tensor]):
    """Items that take ``item_s`` each to make (a JPEG decode, say), by sleeping."""

    def __init__(self, count: int, item_s: float) -> None:
        self.count, self.item_s = count, item_s

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> torch.Tensor:
        time.sleep(self.item_s)
        return torch.zeros(4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epoch-batches", type=int, default=16)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--item-ms", type=float, default=4.0, help="time to make one item")
    parser.add_argument("--step-ms", type=float, default=12.0, help="time of one step")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--block-s", type=float, default=0.0, help="0: four waves of the workers")
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args(argv)

    items = SlowItems(args.epoch_batches * args.batch, args.item_ms / 1e3)
    loader = torch.utils.data.DataLoader(
        items,
        batch_size=args.batch,
        shuffle=True,
        drop_last=True,
        num_workers=args.workers,
        persistent_workers=True,
        prefetch_factor=4,
    )
    batches = itertools.chain.from_iterable(itertools.repeat(loader))

    def step() -> None:
        next(batches)
        time.sleep(args.step_ms / 1e3)

    per_batch_s = args.batch * args.item_ms / 1e3 / args.workers
    block_s = args.block_s or 4 * args.workers * per_batch_s  # Loader.block_s_under's waves
    epoch = len(loader)
    print(
        f"epoch: {epoch} batches; a step {args.step_ms:g} ms; a batch every "
        f"{per_batch_s * 1e3:.1f} ms from {args.workers} workers (one worker's batch, as at an "
        f"epoch's start: {args.batch * args.item_ms:.0f} ms); timed blocks of {block_s:.2f} s "
        f"against blocks of one epoch ({epoch} calls)"
    )
    widest = {"time": 0.0, "epoch": 0.0}
    for repeat in range(args.repeats):
        for way, calls in (("time", None), ("epoch", epoch)):
            result = compare(
                {"a": step, "b": step},
                warmup=2,
                target_s=0.0,
                min_rounds=12,
                block_s=block_s,
                calls=calls,
                watch=False,
            ).ratio("b")
            width = result.high / result.low
            widest[way] = max(widest[way], width)
            print(
                f"repeat {repeat + 1}, blocks of {way:<5}: b/a {result.value:.3f}x "
                f"({result.low:.3f}-{result.high:.3f}, {result.level:.0%} over "
                f"{result.rounds} rounds; high/low {width:.2f})"
            )
    print(
        f"widest interval (high/low), identical work: blocks of a fixed time {widest['time']:.2f}, "
        f"blocks of one epoch {widest['epoch']:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
