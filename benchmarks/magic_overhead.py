"""What ``%%amp``, ``%%memsummary``, ``%%profile`` and ``%compile``'s reporter add to a cell.

In a real IPython shell with ``%load_ext jupyter_gpu``, each magic's cell is timed against the
same cell written by hand with the torch call the magic wraps (whole ``run_cell`` calls, output
captured in both), by the one timing method (``jupyter_gpu.measure.compare``): interleaved
rounds, each a block of both cells, the order alternating, so that drift hits both alike. What a
magic adds is the median of the rounds' paired differences, and its share the median of their
paired ratios, each with its interval; a target is met only where the whole interval is under it.
Garbage is collected before each block, untimed (as ``--replay`` does before each run).
(Until 2026-12-05 the medians of 200 alternated runs were subtracted, with no interval.)

- ``%%amp``: against ``with torch.autocast(...)`` around the same code. Target: under 1 ms.
- ``%%memsummary``: against the same code between the allocator reads the magic makes
  (on CUDA ``torch.cuda.memory_stats`` before/after and, the earlier peak being above the
  memory in use after the first run, the allocator trace of the cell: history on without
  stacks, ``_snapshot()``, history off; the process's resident memory on CPU). Target: under
  1 ms.
- ``%%amp`` with ten forwards in the cell, against the same by hand (no target): each further
  forward casts the weights again under the magic's non-caching autocast.
- ``%compile``'s reporter (the pre/post-run-cell hooks its first use installs): a cell that
  compiles nothing, with the hooks and without. Target: under 1 ms.
- ``%%profile`` (table, timeline, GPU idle time, hints): against a bare
  ``torch.profiler.profile`` block that prints ``key_averages().table()``. Target: within 10 %.
  Also shown (no target): against the profiler block and ``key_averages()`` alone, no table.

On CPU torch runs one intra-op thread: on a shared machine its threads wait on each other and
add milliseconds of noise to every cell, magic or not.

Also: the time of ``%load_ext jupyter_gpu`` in a fresh process (target under 0.3 s) and
whether it imported torch. Runs on CUDA when torch sees a GPU, else on CPU:

    python benchmarks/magic_overhead.py               # about a minute
    python benchmarks/magic_overhead.py --rounds 16   # quicker, wider intervals
    python benchmarks/magic_overhead.py --json out.json

``--replay TRACE.json`` times only what happens after the profiler stops, on any machine: the
events of a Chrome trace written by ``%%profile --trace`` on a GPU are rebuilt as torch's
``FunctionEvent`` objects (CPU ops nested per thread, kernels attached to the op that launched
them), then ``key_averages()``, ``key_averages().table()`` and the magic's tables, timeline and
hints (output captured) are timed on them: CPU time, medians, garbage collected before each.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from jupyter_gpu.measure import Ratio, Variant, compare  # noqa: E402 (after the path set-up above)
from jupyter_gpu.measure.interval import rounds_interval  # noqa: E402 (as above)

SETUP = """
import torch
dev = "cuda" if torch.cuda.is_available() else "cpu"
if dev == "cpu":
    torch.set_num_threads(1)  # on a shared machine, intra-op threads wait on each other
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(4)]).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(64, 256, device=dev)

def step():
    opt.zero_grad()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    return loss
"""

CPU_CATS = {"cpu_op", "cuda_runtime", "cuda_driver", "user_annotation", "python_function"}
GPU_CATS = {"kernel", "gpu_memset", "gpu_memcpy", "gpu_user_annotation"}
WORK = "y = model(x)\nsync()"
PROFILE_WORK = "for _ in range(10):\n    step()\nsync()"

AMP_BASE = "with torch.autocast(dev, dtype=torch.bfloat16):\n    y = model(x)\nsync()"
# Ten forwards in one cell: %%amp's autocast does not cache the weights' casts (see its docs),
# a hand-written torch.autocast does, so each further forward costs the magic a cast.
TEN_FORWARDS = "for _ in range(10):\n    y = model(x)"
AMP_BASE_TEN = (
    "with torch.autocast(dev, dtype=torch.bfloat16):\n"
    + "\n".join("    " + line for line in TEN_FORWARDS.splitlines())
    + "\nsync()"
)
MEM_BASE_CUDA = (
    "_b = torch.cuda.memory_stats()\n"
    "torch.cuda.memory._record_memory_history('all', context=None, stacks='python', "
    "max_entries=1_000_000, clear_history=True)\n"
    f"{WORK}\n_s = torch.cuda.memory._snapshot()\n"
    "torch.cuda.memory._record_memory_history(None)\n_a = torch.cuda.memory_stats()"
)
# The magic's own reads on CPU (resident size and peak, one /proc/self/status read each).
MEM_BASE_CPU = (
    "from jupyter_gpu.magics.probes.process_memory import read_process_memory\n"
    f"_b = read_process_memory()\n{WORK}\n_a = read_process_memory()"
)
PROFILE_BARE = (
    "from torch.profiler import ProfilerActivity, profile\n"
    "acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == 'cuda' else [])\n"
    "with profile(activities=acts) as prof:\n"
    + "\n".join("    " + line for line in PROFILE_WORK.splitlines())
    + "\nprof.key_averages()"
)
PROFILE_BASE = (
    "from torch.profiler import ProfilerActivity, profile\n"
    "acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == 'cuda' else [])\n"
    "with profile(activities=acts) as prof:\n"
    + "\n".join("    " + line for line in PROFILE_WORK.splitlines())
    + "\nsort = 'self_cuda_time_total' if dev == 'cuda' else 'self_cpu_time_total'\n"
    "print(prof.key_averages().table(sort_by=sort, row_limit=15))"
)


def load_time() -> tuple[float, bool]:
    """``%load_ext jupyter_gpu``'s median seconds in a fresh process (of 5), and whether it
    imported torch.

    With the bytecode cached, as after ``pip install`` (which compiles it): under
    ``PYTHONDONTWRITEBYTECODE`` (set on our development VM) every run compiled every module
    from source, 230-250 ms on 2026-12-05 against 131 ms cached. One untimed run first writes
    the bytecode of an editable install beside its sources (``__pycache__``, which git ignores).
    """
    code = (
        "import sys, time\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance()\n"
        "t = time.perf_counter()\n"
        "ip.run_line_magic('load_ext', 'jupyter_gpu')\n"
        "print(time.perf_counter() - t, 'torch' in sys.modules)\n"
    )
    times, imported = [], False
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for run in range(6):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env=env,
        ).stdout.split()
        if run:  # the first writes the bytecode
            times.append(float(out[0]))
        imported = imported or out[1] == "True"
    return statistics.median(times), imported


@dataclass(frozen=True)
class Overhead:
    """A magic's cell against the same cell by hand, timed by the one timing method.

    ``with_magic_s``/``by_hand_s``: per-call medians over the rounds; ``added_s``: the median
    of the rounds' paired differences (with magic less by hand), with its interval;
    ``ratio``: with magic over by hand, paired round by round, with its interval.
    """

    with_magic_s: float
    by_hand_s: float
    added_s: float
    added_interval_s: tuple[float, float]
    ratio: Ratio
    rounds: int
    calls_per_round: int
    machine: str


def compile_reporter(ip: object) -> Callable[[bool], AbstractContextManager[object]]:
    """Installs ``%compile``'s pre/post-run-cell reporter (on) or leaves it out (off).

    The reporter is what ``%compile`` leaves in the shell after its first use: every later
    cell pays for its hooks (dynamo's counters read before and after, its graph-break loggers
    listened to during the cell),
    whether or not it compiles.
    """
    from jupyter_gpu.magics import loaded_magics
    from jupyter_gpu.magics.compile import CompileMagics
    from jupyter_gpu.magics.compile.magic import CompileWatcher

    magics = loaded_magics(ip, CompileMagics)  # type: ignore[arg-type]  # an InteractiveShell
    assert isinstance(magics, CompileMagics)
    watcher = CompileWatcher(magics)

    @contextlib.contextmanager
    def installed(on: bool) -> Iterator[None]:
        if on:
            watcher.start()
        try:
            yield
        finally:
            if on:
                watcher.stop()

    return installed


def measure(
    ip: object,
    magic: str,
    base: str,
    rounds: int,
    hooks: Callable[[bool], AbstractContextManager[object]] | None = None,
) -> Overhead:
    """``run_cell(magic)`` against ``run_cell(base)`` in interleaved rounds (``compare``).

    Whole ``run_cell`` calls, output captured, timed with ``perf_counter`` (host time is what
    a magic adds: ``device="cpu"``, where CUDA events would time the GPU's stream instead);
    the cells synchronise the GPU themselves. ``hooks(on)``, where given, is entered around
    each block, untimed: ``hooks(True)`` around the magic's, ``hooks(False)`` around the base's.
    """
    from IPython.utils.capture import capture_output

    def cell(src: str) -> Callable[[], None]:
        def once() -> None:
            with capture_output():
                result = ip.run_cell(src)  # type: ignore[attr-defined]  # an InteractiveShell
            if not result.success:
                raise RuntimeError(f"cell failed: {src!r}: {result.error_in_exec!r}")

        return once

    def collected(on: bool) -> Callable[[], AbstractContextManager[object]]:
        @contextlib.contextmanager
        def block() -> Iterator[None]:
            # Untimed, before each block: a full collection of the earlier cells' garbage
            # (about 200 ms on a 2-core VM after a few profiles) otherwise lands on whichever
            # cell crosses the threshold, and made the %%profile rounds' ratios run 0.3x to 3x.
            gc.collect()
            with hooks(on) if hooks is not None else contextlib.nullcontext():
                yield

        return block

    timed = compare(
        {
            "with magic": Variant(cell(magic), collected(True)),
            "by hand": Variant(cell(base), collected(False)),
        },
        device="cpu",
        warmup=10,
        rounds=rounds,
    )
    magic_s, base_s = timed["with magic"].times_s, timed["by hand"].times_s
    added = [m - b for m, b in zip(magic_s, base_s, strict=True)]
    low, high, _ = rounds_interval(added)
    return Overhead(
        timed["with magic"].median_s,
        timed["by hand"].median_s,
        statistics.median(added),
        (low, high),
        timed.ratio("by hand", "with magic"),  # with magic's time over by hand's
        timed.rounds,
        timed["with magic"].calls_per_run,
        "; ".join(timed.machine.notes),
    )


def replay_events(path: Path) -> Any:
    """A Chrome trace's complete events as a torch ``EventList`` with its tree built."""
    import inspect

    from torch._C._autograd import DeviceType
    from torch.autograd.profiler_util import EventList, FunctionEvent

    trace = json.loads(path.read_text())["traceEvents"]
    spans = [e for e in trace if e.get("ph") == "X" and e.get("cat") in CPU_CATS | GPU_CATS]
    t0 = min(e["ts"] for e in spans)
    use_device = "cuda" if any(e["cat"] in GPU_CATS for e in spans) else None
    python_flag = "is_python_function" in inspect.signature(FunctionEvent).parameters
    events, ops = [], {}
    for i, e in enumerate(spans):
        cat, args = e["cat"], e.get("args", {})
        start = e["ts"] - t0
        common = {"use_device": use_device, "stack": [], "input_shapes": []}
        if cat in GPU_CATS:
            evt = FunctionEvent(
                i + 1, e["name"], e["tid"], start, start + e.get("dur", 0), **common,
                device_type=DeviceType.CUDA, device_index=args.get("device", 0),
                device_resource_id=args.get("stream"),
                is_user_annotation=cat == "gpu_user_annotation",
            )  # fmt: skip
            op = ops.get(args.get("External id"))
            if op is not None and cat != "gpu_user_annotation":
                op.append_kernel(e["name"], 0, e.get("dur", 0))
        else:
            if python_flag:
                common["is_python_function"] = cat == "python_function"
            evt = FunctionEvent(
                i + 1, e["name"], e["tid"], start, start + e.get("dur", 0), **common,
                is_user_annotation=cat == "user_annotation",
            )  # fmt: skip
            if cat == "cpu_op":
                ops.setdefault(args.get("External id"), evt)
        events.append(evt)
    listed = EventList(events, use_device=use_device)
    listed._build_tree()  # what torch does before it hands events out
    return listed


def replay(path: Path, runs: int) -> int:
    """Time the post-processing of a recorded profile: torch's tables against the magic's."""

    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output
    from traitlets.config import Config

    from jupyter_gpu.magics.profile.analysis import analyse, hints
    from jupyter_gpu.magics.profile.magic import ProfileMagics
    from jupyter_gpu.magics.profile.report import show_profile
    from jupyter_gpu.magics.profile.results import ProfileResult
    from jupyter_gpu.magics.shell.args import parse

    events = replay_events(path)
    gpu = any(e.device_type != events[0].device_type for e in events)

    class Recorded:  # what the magic reads of a stopped profiler
        def events(self) -> Any:
            return events

        def key_averages(self) -> Any:
            return events.key_averages()

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    ip = InteractiveShell.instance(config=config)
    ip.run_line_magic("load_ext", "jupyter_gpu")
    sort = "self_cuda_time_total" if gpu else "self_cpu_time_total"

    def magic() -> None:
        args = parse(ProfileMagics.profile, "")
        a = analyse(Recorded(), cuda=gpu, autocast_on=False, cell_names={})
        a.hints = hints(a, cuda=gpu, autocast_on=False)
        r = ProfileResult(
            a.rows, a.gpu_idle_fraction, a.hints, 0.0, None, "self_gpu_s" if gpu else "self_cpu_s"
        )
        r.kernel_count = a.kernel_count
        show_profile(r, a, cuda=gpu, args=args)

    cases = {
        "key_averages()": events.key_averages,
        "key_averages().table()": lambda: print(
            events.key_averages().table(sort_by=sort, row_limit=15)
        ),
        "%%profile's tables, timeline, hints": magic,
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for i in range(runs + 1):
        for name, case in cases.items():
            gc.collect()
            with capture_output():
                start = time.process_time()
                case()
                elapsed = time.process_time() - start
            if i:  # the first round warms up
                times[name].append(elapsed)
    kernels = sum(1 for e in events if e.device_type != events[0].device_type)
    print(f"{path.name}: {len(events):,} events ({kernels:,} on a GPU), CPU time, {runs} runs")
    for name, values in times.items():
        print(f"{name:40} {statistics.median(values) * 1e3:9.1f} ms")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rounds",
        type=int,
        default=40,
        help="interleaved rounds a magic, each a block of its cell and the cell by hand (40)",
    )
    parser.add_argument("--runs", type=int, default=15, help="with --replay: timed runs (15)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--replay", type=Path, metavar="TRACE", help="time the post-processing of this trace"
    )
    args = parser.parse_args()
    if args.replay:
        return replay(args.replay, args.runs)

    import torch
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    load_s, torch_imported = load_time()
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    ip = InteractiveShell.instance(config=config)
    ip.run_line_magic("load_ext", "jupyter_gpu")
    ip.run_cell(SETUP)
    cuda = torch.cuda.is_available()
    device = torch.cuda.get_device_name() if cuda else f"CPU ({platform.processor() or 'x86_64'})"

    rows = []
    amp = measure(ip, f"%%amp --dtype bf16\n{WORK}", AMP_BASE, args.rounds)
    rows.append(("%%amp", amp, "< 1 ms"))
    amp_ten = measure(ip, f"%%amp --dtype bf16\n{TEN_FORWARDS}\nsync()", AMP_BASE_TEN, args.rounds)
    rows.append(("%%amp, ten forwards in the cell", amp_ten, "info"))
    base = MEM_BASE_CUDA if cuda else MEM_BASE_CPU
    mem = measure(ip, f"%%memsummary\n{WORK}", base, args.rounds)
    rows.append(("%%memsummary", mem, "< 1 ms"))
    prof = measure(ip, f"%%profile\n{PROFILE_WORK}", PROFILE_BASE, args.rounds)
    rows.append(("%%profile", prof, "< 10 %"))
    bare = measure(ip, f"%%profile\n{PROFILE_WORK}", PROFILE_BARE, args.rounds)
    rows.append(("%%profile vs profiler + key_averages() only", bare, "info"))
    watched = measure(ip, WORK, WORK, args.rounds, hooks=compile_reporter(ip))
    rows.append(("%compile's reporter, a cell that compiles nothing", watched, "< 1 ms"))

    print(
        f"magic overhead per cell on {device}, torch {torch.__version__}: {args.rounds} "
        "interleaved rounds a magic (jupyter_gpu.measure.compare, perf_counter); a target is met "
        "only where the whole interval is under it"
    )
    print(
        f"%load_ext jupyter_gpu: {load_s * 1e3:.1f} ms (target < 300 ms); "
        f"imported torch: {torch_imported}"
    )
    print(
        f"{'magic':50} {'with magic':>12} {'by hand':>12} {'added (interval)':>42} {'target':>8}"
        "  met"
    )
    results: dict[str, Any] = {
        "device": device,
        "torch": torch.__version__,
        "rounds": args.rounds,
        "load_ext_ms": load_s * 1e3,
        "load_ext_imported_torch": torch_imported,
    }
    all_ok = load_s < 0.3 and not torch_imported
    for name, o, target in rows:
        ratio = o.ratio
        if target == "< 1 ms":
            low, high = o.added_interval_s
            shown = f"{o.added_s * 1e3:+.3f} ms ({low * 1e3:+.3f} to {high * 1e3:+.3f})"
            ok = high < 1e-3
        elif target == "info":  # shown, no target: what it adds, and as a share
            low, high = o.added_interval_s
            shown = (
                f"{o.added_s * 1e3:+.3f} ms ({low * 1e3:+.3f} to {high * 1e3:+.3f}), "
                f"{ratio.value - 1:+.1%}"
            )
            ok = True
        else:  # a share: "< 10 %"
            shown = f"{ratio.value - 1:+.1%} ({ratio.low - 1:+.1%} to {ratio.high - 1:+.1%})"
            ok = ratio.high < 1.10
        all_ok = all_ok and ok
        print(
            f"{name:50} {o.with_magic_s * 1e3:9.3f} ms {o.by_hand_s * 1e3:9.3f} ms {shown:>42} "
            f"{target:>8}  {'yes' if ok else 'NO'}"
        )
        if o.machine:
            print(f"  {o.machine}")
        results[name] = {
            "with_magic_ms": o.with_magic_s * 1e3,
            "by_hand_ms": o.by_hand_s * 1e3,
            "added_ms": o.added_s * 1e3,
            "added_interval_ms": [v * 1e3 for v in o.added_interval_s],
            "ratio": ratio.value,
            "ratio_interval": [ratio.low, ratio.high],
            "rounds": o.rounds,
            "calls_per_round": o.calls_per_round,
            "machine": o.machine,
            "ok": ok,
        }
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
