"""What ending ``%%torchrun``'s processes without finalizing the interpreter saves.

A Python process that imported torch spends most of a second ending normally (the interpreter's
finalization: module teardown and full garbage collections over torch's objects). ``%%torchrun``
starts torchrun's agent and one process per rank, and the cell waits for the ranks to end, then
for the agent; they now end through ``jupyter_gpu.distributed.process_end.end_process``, and
``JUPYTER_GPU_FULL_EXIT=1`` makes them end the normal way. Both ways are timed here, by the one
timing method (``jupyter_gpu.measure.compare``: interleaved rounds, the order alternating, one
call per block, ``perf_counter``), each figure with its interval:

1. **a process**: ``python -c "import torch"`` then the end, each way (no CUDA: a process that
   made a CUDA context always ends the normal way, ``process_end.py`` says why);
2. **a cell**: an empty ``%%torchrun`` cell in a real IPython shell (``%load_ext jupyter_gpu``),
   launch to the cell's end: 2 CPU ranks with gloo, or one rank per GPU with nccl where torch
   sees GPUs (there only torchrun's agent ends quickly: the ranks made CUDA contexts).

    python benchmarks/torchrun_launch.py                 # about 3 minutes on 2 cores
    python benchmarks/torchrun_launch.py --rounds 8 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from jupyter_gpu.distributed.process_end import FULL_EXIT_ENV  # noqa: E402 (after the path set-up)
from jupyter_gpu.measure import compare  # noqa: E402 (as above)
from jupyter_gpu.measure.interval import rounds_interval  # noqa: E402 (as above)

FULL, QUICK = "normal exit", "end_process"


def _figures(timed: Any) -> dict[str, Any]:
    """Medians of each way, the median of the rounds' paired savings with its interval, and the
    ratio (normal over end_process) with its interval."""
    full_s, quick_s = timed[FULL].times_s, timed[QUICK].times_s
    saved = [f - q for f, q in zip(full_s, quick_s, strict=True)]
    low, high, level = rounds_interval(saved)
    ratio = timed.ratio(QUICK, FULL)
    return {
        "normal_exit_s": timed[FULL].median_s,
        "end_process_s": timed[QUICK].median_s,
        "saved_s": statistics.median(saved),
        "saved_interval_s": [low, high],
        "saved_level": level,
        "ratio": ratio.value,
        "ratio_interval": [ratio.low, ratio.high],
        "rounds": timed.rounds,
        "machine": "; ".join(timed.machine.notes),
        "describe": ratio.describe(),
    }


def process_end(rounds: int) -> dict[str, Any]:
    """``import torch`` in a fresh process, then each end."""
    work = "import torch\n"
    ends = {
        FULL: "import sys\nsys.exit(0)\n",
        QUICK: "from jupyter_gpu.distributed.process_end import end_process\nend_process(0)\n",
    }
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    env.pop(FULL_EXIT_ENV, None)

    def run(code: str) -> Callable[[], None]:
        def once() -> None:
            subprocess.run([sys.executable, "-c", code], env=env, check=True)

        return once

    timed = compare(
        {name: run(work + end) for name, end in ends.items()},
        device="cpu",
        warmup=1,
        rounds=rounds,
        calls=1,
    )
    return _figures(timed)


def cell(rounds: int, gpus: int) -> dict[str, Any]:
    """An empty ``%%torchrun`` cell, launch to end, in a real IPython shell."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jupyter_gpu")
    ranks = f"-n {gpus} --backend nccl" if gpus else "-n 2 --backend gloo"
    lines = {FULL: f"{ranks} --env {FULL_EXIT_ENV}=1", QUICK: ranks}

    def run(line: str) -> Callable[[], None]:
        def once() -> None:
            with capture_output():
                ip.run_cell_magic("torchrun", line, "pass\n")

        return once

    timed = compare(
        {name: run(line) for name, line in lines.items()},
        device="cpu",
        warmup=1,
        rounds=rounds,
        calls=1,
    )
    return {"ranks": ranks, **_figures(timed)}


def _row(what: str, f: dict[str, Any]) -> str:
    low, high = f["saved_interval_s"]
    return (
        f"| {what} | {f['normal_exit_s']:.2f} s | {f['end_process_s']:.2f} s | "
        f"{f['saved_s']:.2f} s ({low:.2f}-{high:.2f} s) | {f['describe']} |"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=12, help="rounds of each comparison")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    os.environ.pop(FULL_EXIT_ENV, None)
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    machine = (
        f"{platform.node()}: {os.cpu_count()} CPUs, "
        + (f"{gpus} x {torch.cuda.get_device_name(0)}" if gpus else "no GPU")
        + f", torch {torch.__version__}, Python {platform.python_version()}"
    )
    print(f"{machine}; {args.rounds} rounds each", flush=True)
    figures = {"machine": machine, "process": process_end(args.rounds)}
    figures["cell"] = cell(args.rounds, gpus)
    print("| what | normal exit | end_process | saved (interval) | ratio |")
    print("|---|---|---|---|---|")
    print(_row("`import torch`, then the end", figures["process"]))
    print(_row(f"an empty `%%torchrun {figures['cell']['ranks']}` cell", figures["cell"]))
    for part in ("process", "cell"):
        if figures[part]["machine"]:
            print(f"{part}: {figures[part]['machine']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
