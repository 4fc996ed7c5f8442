"""Notebook 04's CUPTI probe, round by round: where do its children's rounds spread?

Notebook 04, section 5, judges its claim (the augmentation on the GPU keeps at least 80 % of the
model alone's rate) in a fresh process that never profiled, one of three children of
``jupyter_gpu.tutorials.cupti_probe``. On 2026-12-06 (an H100) that child's pipeline read 1.16x
slower than its model alone, with an interval of 1.06-1.57x: its rounds spread, and the claim
failed on the interval's upper end. The notebook prints only the medians and the ratios. This runs
the same probe and prints every block: each round's step time per child and step, the round's
direction (the probe reverses the order every other round, so a child's first block after its
siblings ran is its model alone in one direction and its pipeline in the other), and per child the
pipeline-over-model quotient in forward and in reversed rounds. If the spread follows the direction,
it is the cost of a child's first block after a pause; if it follows the round, the machine moved.

``--variants never`` starts three children that never profile: any difference among them is the
processes' own, with no profile involved. ``--rotate K`` moves the first K children to the end:
the probe starts its children in order and times them in that order (reversed every other
round), so a child that reads slower in every position it is given is slow by its variant, and
one that reads slower only where it is put first is slow by its place (on 2026-12-06, in three
runs on one H100, the first child read the largest ratio each time; in five runs on another
H100 later that day it did not). ``--start reversed`` starts the children last to first (their
``Popen`` calls, milliseconds apart; they warm up side by side) and still times them in the given
order: a first child that reads slowest either way is slow by its place in the rounds, one that
moves with the start order is slow by being started first.

    python benchmarks/cupti_probe_rounds.py                       # on a GPU, notebook 04's sizes
    python benchmarks/cupti_probe_rounds.py --variants never
    python benchmarks/cupti_probe_rounds.py --rotate 1          # never profiled started last
    python benchmarks/cupti_probe_rounds.py --variants never --start reversed
    python benchmarks/cupti_probe_rounds.py --device cpu --size 32 --batch 32 --width 8 \\
        --steps 2 --rounds 2                                     # dry run

Writes a JSON copy to $JUPYTER_GPU_OUT (else $OUT)/cupti_probe_rounds.json when set (or --json
PATH).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a source tree without installing the package

from benchmarks.outputs import write_json  # noqa: E402 (after the path set-up above)
from jupyter_gpu.tutorials.cupti_probe import (  # noqa: E402 (as above)
    VARIANTS,
    ProbeResult,
    ProbeSize,
    ProbeVariant,
    measure,
    probe_key,
)

#: Three children that never profile: what processes differ by themselves.
NEVER = {f"never profiled ({n})": ProbeVariant(profiled=False) for n in "abc"}


def rotated(variants: dict[str, ProbeVariant], k: int) -> dict[str, ProbeVariant]:
    """``variants`` with its first ``k`` (modulo their number) moved to the end, in order."""
    names = list(variants)
    k %= len(names)
    return {name: variants[name] for name in names[k:] + names[:k]}


def rounds_table(result: ProbeResult) -> list[str]:
    """A legend of the children, then one line per round: its direction and each block, in ms."""
    lines = [f"  child {n + 1}: {v}" for n, v in enumerate(result.variants)]
    keys = [(n, v, s) for n, v in enumerate(result.variants) for s in result.steps]
    lines.append("round  order     " + "".join(f"{f'{n + 1} {s}':>12s}" for n, _, s in keys))
    times = {(v, s): result.timings[probe_key(v, s)].times_s for _, v, s in keys}
    for r in range(result.timings.rounds):
        direction = "forward " if r % 2 == 0 else "reversed"
        cells = "".join(f"{times[v, s][r] * 1e3:12.2f}" for _, v, s in keys)
        lines.append(f"{r + 1:5d}  {direction}  {cells}")
    return lines


def quotients_by_direction(result: ProbeResult, variant: str) -> dict[str, list[float]]:
    """The variant's pipeline/model quotient in each round, split by the round's direction."""
    pipeline = result.timings[probe_key(variant, "pipeline")].times_s
    model = result.timings[probe_key(variant, "model")].times_s
    split: dict[str, list[float]] = {"forward": [], "reversed": []}
    for r, (p, m) in enumerate(zip(pipeline, model, strict=True)):
        split["forward" if r % 2 == 0 else "reversed"].append(p / m)
    return split


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--size", type=int, default=64, help="image side in pixels")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--width", type=int, default=32, help="CNN width (first stage channels)")
    parser.add_argument("--steps", type=int, default=50, help="steps a timed block (04: 50)")
    parser.add_argument("--rounds", type=int, default=12, help="interleaved rounds (04: 12)")
    parser.add_argument(
        "--variants",
        choices=("notebook", "never"),
        default="notebook",
        help="notebook 04's three children, or three that never profile",
    )
    parser.add_argument(
        "--compiled", action="store_true", help="the augmentation compiled, as 04 runs it on a GPU"
    )
    parser.add_argument(
        "--rotate", type=int, default=0, help="move the first K children to the end of the order"
    )
    parser.add_argument(
        "--start",
        choices=("given", "reversed"),
        default="given",
        help="start the children in the order they are timed, or last to first",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    size = ProbeSize(
        args.device, args.size, args.batch, args.width, args.steps, compiled=args.compiled
    )
    variants = rotated(dict(VARIANTS if args.variants == "notebook" else NEVER), args.rotate)
    start_order = list(variants)[:: -1 if args.start == "reversed" else 1]
    print(
        f"{args.device}; {args.size} px, batch {args.batch}, width {args.width}; "
        f"{args.rounds} rounds of {args.steps} steps a block; augmentation "
        f"{'compiled' if args.compiled else 'eager'}; children: {', '.join(variants)}, started "
        f"{'last to first' if args.start == 'reversed' else 'in that order'}; "
        f"{time.strftime('%Y-%m-%d %H:%M')}"
    )
    start = time.perf_counter()
    result = measure(
        size,
        rounds=args.rounds,
        variants=variants,
        steps=("model", "pipeline"),
        start_order=start_order,
    )
    print(f"took {time.perf_counter() - start:.0f} s; step times in ms:")
    print("\n".join(rounds_table(result)))
    print("\npipeline / model alone, each child's own rounds:")
    children: dict[str, dict[str, object]] = {}
    for variant in result.variants:
        split = quotients_by_direction(result, variant)
        within = result.ratio(variant, "pipeline", against=(variant, "model"))
        medians = {d: statistics.median(q) for d, q in split.items() if q}
        print(
            f"  {variant:32s} {within.describe():36s} median in forward rounds "
            f"{medians.get('forward', float('nan')):.2f}, reversed "
            f"{medians.get('reversed', float('nan')):.2f}"
        )
        children[variant] = {
            step: list(result.timings[probe_key(variant, step)].times_s) for step in result.steps
        } | {"within": within.describe(), "by_direction": split}
    if result.killed:
        print(f"killed after asked to quit: {', '.join(result.killed)}")
    figures = {"args": vars(args) | {"json": None}, "children": children}
    write_json("cupti_probe_rounds.json", figures, path=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
