"""What our own compile-cache walk does to the figures timed beside it, and that it now waits.

``%compile`` walks the on-disk compile caches in a thread of the notebook's process
(``jupyter_gpu/magics/compile/cache_walk.py``): right before ``--bench`` times, and after every
cell that compiled, when the next cell may be the one that times. A thread in the same process
competes with the timed calls for the GIL and the CPU. ``jupyter_gpu/measure/quiet.py`` makes the
walk wait, between two directories, while a figure is timed.

This builds a synthetic cache of ``--files`` files (``compile_cache_walk.build_cache``) and
times, in one ``compare()`` (interleaved rounds, each ratio with its interval), a GPT forward
eager and compiled (``timing_peer.workloads``: bf16 on a GPU), each alone and each with a walk
running beside its blocks:

- **as before**: the walk ignores the timing (what ``--bench`` had until now);
- **as now**: the walk waits at :func:`~jupyter_gpu.measure.quiet.pause_while_timing`, as
  ``%compile``'s does.

It prints how much slower each step ran with the walk beside, and the compiled-over-eager ratio
alone and beside the walk. The walk runs beside a variant's blocks only (its context lets the
thread go on, between two directories), so the variants alone and beside share the rounds.

    python benchmarks/background_walk.py [--files 100000] [--device cuda|cpu] [--seconds 4]

With ``$OUT`` (or ``$JUPYTER_GPU_OUT``) set, the figures also go to ``background_walk.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402  (after the path: the benchmark runs from a checkout)

from benchmarks.compile_cache_walk import build_cache  # noqa: E402
from benchmarks.outputs import write_json  # noqa: E402
from benchmarks.timing_peer import workloads  # noqa: E402
from jupyter_gpu.compile_cache import scan_caches  # noqa: E402
from jupyter_gpu.measure import Comparison, Variant, compare  # noqa: E402
from jupyter_gpu.measure.quiet import pause_while_timing  # noqa: E402


class BesideWalk:
    """A thread that walks the caches over and over, only while a variant's blocks run.

    ``honours_timing``: the walk also waits while a figure is timed, as ``%compile``'s does.
    """

    def __init__(self, honours_timing: bool) -> None:
        self.honours_timing = honours_timing
        self.running = threading.Event()
        self.walks = 0
        self.waited_s = 0.0
        threading.Thread(target=self._loop, daemon=True).start()

    def _between_folders(self) -> None:
        self.running.wait()
        if self.honours_timing:
            self.waited_s += pause_while_timing()

    def _loop(self) -> None:
        while True:
            scan_caches(pause=self._between_folders)
            self.walks += 1

    @contextlib.contextmanager
    def beside(self) -> Iterator[None]:
        self.running.set()
        try:
            yield
        finally:
            self.running.clear()


def time_beside(
    eager: Callable[[], object], compiled: Callable[[], object], walk: BesideWalk, seconds: float
) -> Comparison:
    return compare(
        {
            "eager": eager,
            "compiled": compiled,
            "eager, walk beside": Variant(eager, walk.beside),
            "compiled, walk beside": Variant(compiled, walk.beside),
        },
        warmup=3,
        target_s=seconds,
    )


def rows(comparison: Comparison) -> dict[str, Any]:
    """The figures of one comparison, printed as they are read."""
    figures: dict[str, Any] = {"method": comparison.method(), "notes": comparison.machine.notes}
    for name in comparison:
        figures[f"{name} ms"] = comparison[name].median_s * 1e3
    for step in ("eager", "compiled"):
        slower = comparison.ratio(step, baseline=f"{step}, walk beside")
        figures[f"{step}: walk beside over alone"] = asdict(slower)
        print(
            f"  {step:9s} alone {comparison[step].median_s * 1e3:8.3f} ms a call; walk beside: "
            f"{slower.value:.2f}x as long ({slower.low:.2f}-{slower.high:.2f})"
        )
    for label, suffix in (("alone", ""), ("walk beside", ", walk beside")):
        ratio = comparison.ratio(f"compiled{suffix}", baseline=f"eager{suffix}")
        figures[f"compiled over eager, {label}"] = asdict(ratio)
        print(f"  compiled over eager, {label:11s}: {ratio.describe()}")
    print(f"  {comparison.method()}")
    for note in comparison.machine.notes:
        print(f"  machine: {note}")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--files", type=int, default=100_000, help="files in the synthetic cache")
    parser.add_argument("--seconds", type=float, default=4.0, help="timed rounds per comparison")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"{name}, torch {torch.__version__}, {os.cpu_count()} CPUs", flush=True)

    scratch = Path(tempfile.mkdtemp(prefix="jgpu-walk-bench-"))
    build_cache(scratch / "inductor", args.files)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(scratch / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(scratch / "triton-empty")
    # torch's default Inductor folder (TMPDIR/torchinductor_<user>) is walked beside a configured
    # one; under the scratch folder too, the walk counts only the synthetic files.
    tempfile.tempdir = str(scratch)
    start = time.perf_counter()
    walked = scan_caches()
    walk_s = time.perf_counter() - start
    print(f"synthetic cache: {walked.file_count} files; one walk alone takes {walk_s:.2f} s")

    what, eager, compiled = workloads(device, {"gpt"})["gpt"]
    print(f"{what}; compiling...", flush=True)
    compiled()  # the compile, before any timing
    figures: dict[str, Any] = {
        "device": name,
        "torch": torch.__version__,
        "files": walked.file_count,
        "walk_alone_s": walk_s,
        "what": what,
    }
    for label, honours in (
        ("as before (the walk ignores the timing)", False),
        ("as now (the walk waits while a figure is timed)", True),
    ):
        walk = BesideWalk(honours)
        print(label, flush=True)
        figures[label] = rows(time_beside(eager, compiled, walk, args.seconds))
        figures[label]["walks finished"] = walk.walks
        print(f"  walks finished beside the blocks: {walk.walks}; waited {walk.waited_s:.2f} s")
    write_json("background_walk.json", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
