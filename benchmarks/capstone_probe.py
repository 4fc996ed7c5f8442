"""Measure notebook 07's candidate final configurations on one GPU, to pick its final shape.

    python benchmarks/capstone_probe.py            # the default candidates, under 4 min on an H200
    python benchmarks/capstone_probe.py --shapes d2048-hd128-l8-t2048,d3072-hd128-l6-t2048
    python benchmarks/capstone_probe.py --device cpu --shapes d128-hd64-l2-t64 \\
        --backend aot_eager --budget-s 120     # a dry run without a GPU

Each candidate shape (``d<width>-hd<head width>-l<layers>-t<sequence>``) trains with the final
configuration of ``jupyter_gpu/tutorials/capstone/train_script.py``, the script notebook 07
writes: DataLoader workers, pinned memory and non-blocking copies; bf16 autocast (fp16 where
the GPU has no bf16); ``scaled_dot_product_attention``; fused AdamW; each block compiled
(regional compilation, default mode); no host sync in the loop; the batch sized from measured
memory (``capstone/fit.py``: one eager trial step, ``mem_get_info``; stepped down by an eighth
while it runs out of memory, ``settle_batch``). Each figure is a single throughput, the median of
3 runs of steps back to back (``measure_training``); the percentages between items in the closing
lines divide medians of separate runs, a guide for picking the shape: the notebook times each of
its rows against the row before, interleaved, with an interval. ``max-autotune`` benchmarks its
candidate kernels in subprocesses (``autotune_in_subproc``).

Then, on the fastest candidate, as long as ``--budget-s`` allows (the cold compiles dominate):
a kernel breakdown of 2 profiled steps (where the GPU's time goes); ``max-autotune-no-cudagraphs``
(its compile time is the price); the student's shape with the same configuration (what the
notebook's last section gains); the student's starting version (fp32, attention by hand, the
default foreach Adam, ``.item()`` every step, a DataLoader without workers, the batch halved on
OOM: the denominator of the 10x target, and the notebook's slowest section); the whole model
compiled instead of its blocks; SDPA pinned to cuDNN's attention kernel (notebook 07's attention
row); and FP8 training of the blocks with torchao's float8, tensorwise (notebook 07's FP8 row;
skipped with the reason where torchao or an FP8 GPU is missing). MFU is model FLOPs over this
GPU's data-sheet dense peak in the
16-bit dtype (``jupyter_gpu.measure.peaks``; none for a GPU not in the table); the square product's
rate sustained for 2 s (``jupyter_gpu.measure.matmul_rate``) is measured first and printed beside
it as the matmul rate measured here, never as a ceiling.

Model FLOPs: ``6 N + 12 L d T`` per token (``ModelShape.train_flops_per_token``, the convention
of ``jupyter_gpu/tutorials/flops.py``; attention's two products counted whole, causal mask
included). Compiles are cold: a fresh ``TORCHINDUCTOR_CACHE_DIR`` unless ``--keep-cache``.
Prints one table and the winner's ``JUPYTER_GPU_CAPSTONE_SHAPE``; writes
``capstone_probe.json`` to ``$JUPYTER_GPU_OUT`` (else ``$OUT``, or ``--json``) after every row.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a source tree without installing the package

from benchmarks.outputs import write_json  # noqa: E402 (after the path set-up)

# Wider blocks make larger matrix products and leave less of the step to elementwise work;
# longer sequences give attention (counted whole) a larger share; heads of 64 against 128.
DEFAULT_SHAPES = (
    "d2048-hd128-l8-t2048,d3072-hd128-l6-t2048,d2048-hd128-l8-t4096,"
    "d4096-hd128-l4-t2048,d2048-hd64-l8-t2048"
)
# Seconds each item is expected to take on an H200 (cold compile included): an item starts only
# if it fits in what is left of --budget-s.
ESTIMATE_S = {
    "candidate": 20,
    "profile": 8,
    "max-autotune": 110,
    "student-final": 20,
    "student-start": 35,
    "whole-model": 40,
    "cudnn-attention": 25,
    "float8": 30,
}
#: Notebook 07's target at full size on one H200 (issue 32): bf16-equivalent model FLOPs.
TARGET_TFLOPS = 650.0


import torch  # noqa: E402 (after the path set-up above)

from jupyter_gpu.host.cpus import read_cpu_budget  # noqa: E402
from jupyter_gpu.magics.probes.precision import set_tf32  # noqa: E402
from jupyter_gpu.measure.peaks import PeakLookup, peak_for  # noqa: E402
from jupyter_gpu.tutorials.capstone.data import NoisyWindows, endless, student_loader  # noqa: E402
from jupyter_gpu.tutorials.capstone.fit import (  # noqa: E402
    BatchFit,
    fit_batch,
    gradient_bytes,
    memory_budget,
    release_cache,
    settle_batch,
)
from jupyter_gpu.tutorials.capstone.model import CapstoneGPT  # noqa: E402
from jupyter_gpu.tutorials.capstone.profiles import kernel_kind  # noqa: E402
from jupyter_gpu.tutorials.capstone.shapes import (  # noqa: E402
    ModelShape,
    final_shape_from_spec,
    student_shape,
)
from jupyter_gpu.tutorials.capstone.steps import (  # noqa: E402
    StepFigures,
    format_matmul_rate,
    measure_training,
)
from jupyter_gpu.tutorials.capstone.train_script import (  # noqa: E402
    batches,
    build,
    corpus_text,
    make_step,
    pick_dtype,
)
from jupyter_gpu.tutorials.flops import MODEL_FLOPS_CONVENTION  # noqa: E402
from jupyter_gpu.tutorials.timing import synchronize  # noqa: E402
from jupyter_gpu.tutorials.watch import GpuWatch  # noqa: E402

GiB = 2**30
CORPUS_BYTES = 16_000_000


@dataclass(frozen=True)
class Settings:
    """What every measurement of one probe run shares."""

    device: str
    dtype: torch.dtype | None
    backend: str
    peak: PeakLookup  # the data-sheet dense peak MFU divides by, or why there is none
    matmul_rate_tflops: float  # the square product's rate, sustained, measured here
    max_batch: int
    trial_batch: int


def sixteen_bit(device: str) -> torch.dtype | None:
    """bf16 where the GPU computes it natively, else fp16; ``None`` (fp32) on a CPU."""
    return pick_dtype("auto", torch.device(device))


def cpu_count() -> int:
    """The CPUs this process may keep busy: the cgroup's quota, not the host's cores."""
    return read_cpu_budget().usable


@functools.cache
def text() -> bytes:
    return corpus_text(CORPUS_BYTES)


def free(device: str) -> None:
    """Drop compiled code and cached memory between items."""
    gc.collect()
    torch._dynamo.reset()
    if device == "cuda":
        torch.cuda.empty_cache()


def fit_from_trial(
    model: CapstoneGPT, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler, st: Settings
) -> BatchFit | None:
    """The batch from one eager trial step (after one that creates the optimizer's state)."""
    if st.device != "cuda":
        return None
    shape = model.shape
    x = torch.randint(0, 256, (st.trial_batch, shape.seq_len), device=st.device)

    def one() -> None:
        with torch.autocast("cuda", dtype=st.dtype or torch.float32, enabled=st.dtype is not None):
            loss = model(x, x)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

    one()
    torch.cuda.synchronize()
    static = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    one()
    torch.cuda.synchronize()
    return fit_batch(
        trial_batch=st.trial_batch,
        static_bytes=static,
        trial_peak_bytes=torch.cuda.max_memory_allocated(),
        fixed_bytes=gradient_bytes(model.parameters()),
        budget_bytes=memory_budget(),
    )


def figures_row(shape: ModelShape, batch: int, figs: StepFigures, st: Settings) -> dict[str, Any]:
    return {
        "shape": shape.spec(),
        "describe": shape.describe(),
        "matmul_params_m": round(shape.matmul_params() / 1e6, 1),
        "gflop_per_token": shape.train_flops_per_token() / 1e9,
        "batch": batch,
        "tokens_per_s": figs.tokens_per_s,
        "tokens_per_s_range": figs.tokens_per_s_range,
        "tflops": figs.tflops,
        "mfu": None if st.peak.dense_tflops is None else figs.tflops / st.peak.dense_tflops,
        "of_matmul_rate": figs.tflops / st.matmul_rate_tflops,
        "spread": figs.spread,
        "steps_per_run": figs.timing.calls_per_run,
        "first_step_s": figs.first_step_s,
        "compile_s": max(0.0, figs.first_step_s - figs.timing.median_s),
        "peak_gib": None if figs.peak_bytes is None else figs.peak_bytes / GiB,
    }


def timed(
    step: Any, shape: ModelShape, batch: int, st: Settings, **kw: Any
) -> tuple[StepFigures, dict[str, Any]]:
    tokens = batch * shape.seq_len
    with GpuWatch() as watch, watch.window("timed"):
        figs = measure_training(
            step,
            tokens_per_step=tokens,
            flops_per_step=shape.train_flops_per_token() * tokens,
            device=st.device,
            target_run_s=1.0,
            **kw,
        )
    clocks = watch.stats("timed")
    return figs, {
        "sm_clock_mhz": [clocks.sm_clock_mhz_min, clocks.sm_clock_mhz_max],
        "power_w_mean": clocks.power_w_mean,
    }


def final_row(
    shape: ModelShape,
    st: Settings,
    *,
    mode: str = "default",
    whole: bool = False,
    float8: str = "none",
) -> dict[str, Any]:
    """The final configuration at ``shape``: fitted batch, compiled (regional unless ``whole``).

    ``float8`` (a torchao recipe) trains the blocks' products in FP8, as notebook 07's FP8 row.
    """
    device = torch.device(st.device)
    torch.manual_seed(0)
    model, optimizer = build(
        shape, device, lr=3e-4, compile_mode="none", backend=st.backend, float8=float8
    )
    scaler = torch.amp.GradScaler(device.type, enabled=st.dtype == torch.float16)
    fit = fit_from_trial(model, optimizer, scaler, st)
    batch = st.trial_batch if fit is None else max(1, min(fit.batch, st.max_batch))
    options: dict[str, Any] = {"backend": st.backend, "dynamic": False}
    if mode != "default" and st.backend == "inductor":
        options["mode"] = mode
    net: torch.nn.Module = model
    if whole:
        net = torch.compile(model, **options)  # type: ignore[assignment]  # an OptimizedModule
    else:
        model.compile_blocks(**options)

    def attempt(size: int) -> tuple[StepFigures, dict[str, Any]]:
        optimizer.zero_grad(set_to_none=True)  # what a step that ran out of memory left
        release_cache()
        data = batches(shape, size, device=device, rank=0, workers=None, text=text())
        step = make_step(net, optimizer, data, device=device, dtype=st.dtype, scaler=scaler)
        return timed(step, shape, size, st)

    # The compile runs in the first step. Inductor's in-process autotuning of a Triton mm
    # template hit "CUDA error: an illegal memory access was encountered" (torch 2.11, H200),
    # which poisons the process's CUDA context: benchmark each candidate in a subprocess.
    tuning = "autotune" in mode and st.backend == "inductor"
    with torch._inductor.config.patch(autotune_in_subproc=True) if tuning else nullcontext():
        # The fit predicts allocated memory, not the cache's fragmentation: step down on OOM.
        batch, (figs, clocks) = settle_batch(batch, attempt, fit=fit)
    row = {"final": True, "compile": ("whole model " if whole else "regional ") + mode}
    if float8 != "none":
        row |= {"compile": f"regional {mode}, FP8 {float8}", "float8": float8}
    row |= figures_row(shape, batch, figs, st) | clocks
    if fit is not None:
        row["fit"] = fit.describe()
        row["predicted_peak_gib"] = fit.predicted_peak_bytes(batch) / GiB
    return row


def cudnn_row(shape: ModelShape, st: Settings) -> dict[str, Any]:
    """The final configuration with SDPA limited to cuDNN's attention (07's attention row)."""
    flags = (
        torch.backends.cuda.flash_sdp_enabled(),
        torch.backends.cuda.mem_efficient_sdp_enabled(),
        torch.backends.cuda.cudnn_sdp_enabled(),
    )
    torch.backends.cuda.enable_flash_sdp(False)
    torch.backends.cuda.enable_mem_efficient_sdp(False)
    torch.backends.cuda.enable_cudnn_sdp(True)
    try:
        row = final_row(shape, st)
        return row | {"compile": "regional default, cuDNN attention", "final": False, "cudnn": True}
    finally:
        torch.backends.cuda.enable_flash_sdp(flags[0])
        torch.backends.cuda.enable_mem_efficient_sdp(flags[1])
        torch.backends.cuda.enable_cudnn_sdp(flags[2])


def float8_row(shape: ModelShape, st: Settings) -> dict[str, Any]:
    """The final configuration with the blocks in FP8 (torchao float8, tensorwise), or why not."""
    from jupyter_gpu.tutorials.capstone.float8 import float8_unavailable, torchao_version

    why = float8_unavailable(st.device, bf16=st.dtype == torch.bfloat16)
    if why:
        return {"error": f"skipped: {why}"}
    row = final_row(shape, st, float8="tensorwise")
    return row | {"final": False, "torchao": torchao_version()}


def profile_row(shape: ModelShape, batch: int, st: Settings) -> dict[str, Any]:
    """Where 2 steps of the final configuration spend the GPU's time, by kernel family."""
    from torch.profiler import ProfilerActivity, profile

    device = torch.device(st.device)
    torch.manual_seed(0)
    model, optimizer = build(shape, device, lr=3e-4, compile_mode="default", backend=st.backend)
    scaler = torch.amp.GradScaler(device.type, enabled=st.dtype == torch.float16)
    data = batches(shape, batch, device=device, rank=0, workers=None, text=text())
    step = make_step(model, optimizer, data, device=device, dtype=st.dtype, scaler=scaler)
    for _ in range(3):
        step()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if st.device == "cuda" else [])
    synchronize(st.device)
    begin = time.perf_counter()
    with profile(activities=activities) as prof:
        for _ in range(2):
            step()
        synchronize(st.device)
    wall = time.perf_counter() - begin
    kinds: dict[str, float] = {}
    top: list[tuple[float, str]] = []
    for evt in prof.key_averages():
        if evt.device_type != torch.autograd.DeviceType.CUDA:
            continue
        seconds = evt.self_device_time_total / 1e6
        kinds[kernel_kind(evt.key)] = kinds.get(kernel_kind(evt.key), 0.0) + seconds
        top.append((seconds, evt.key))
    busy = sum(kinds.values())
    return {
        "shape": shape.spec(),
        "batch": batch,
        "profile_wall_s": wall,
        "gpu_busy": busy / wall if wall else None,
        "breakdown": {k: v / wall for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])},
        "top_kernels": [
            {"name": name[:120], "share": seconds / wall} for seconds, name in sorted(top)[::-1][:8]
        ],
    }


def student_start_row(shape: ModelShape, requested: int, st: Settings) -> dict[str, Any]:
    """The student's start: fp32, attention by hand, default Adam, 0 workers, .item() per step."""
    device = torch.device(st.device)
    torch.manual_seed(0)
    with device:
        model = CapstoneGPT(shape, sdpa=False)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    batch, halvings = requested, []
    while True:
        x = torch.randint(0, 256, (batch, shape.seq_len), device=device)
        try:
            model(x, x).backward()
            break
        except torch.OutOfMemoryError:
            halvings.append(batch)
            optimizer.zero_grad(set_to_none=True)
            del x
            release_cache()
            if batch == 1:
                raise
            batch //= 2
    optimizer.zero_grad(set_to_none=True)
    del x
    data = endless(student_loader(NoisyWindows(text(), shape.seq_len, length=10**7), batch))
    losses: list[float] = []

    def step() -> None:
        x, y = next(data)
        x, y = x.to(device), y.to(device)
        loss = model(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())

    figs, clocks = timed(step, shape, batch, st, warmup=1)
    row = {"student_start": True, "out_of_memory_at": halvings}
    return row | figures_row(shape, batch, figs, st) | clocks


def row_line(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"{row['item']}: FAILED {row['error']}"
    if "breakdown" in row:
        shares = ", ".join(f"{k} {v:.0%}" for k, v in row["breakdown"].items())
        return f"{row['item']}: GPU busy {row['gpu_busy']:.0%} of 2 steps: {shares}"
    peak = "" if row.get("peak_gib") is None else f", peak {row['peak_gib']:.1f} GiB"
    mfu = "n/a" if row.get("mfu") is None else f"{row['mfu']:.0%}"
    return (
        f"{row['item']}: batch {row['batch']}, {row['tokens_per_s']:,.0f} tokens/s, "
        f"{row['tflops']:.1f} model TFLOP/s, MFU {mfu} (data-sheet peak), "
        f"{row['of_matmul_rate']:.0%} of the matmul rate measured here, spread "
        f"{row['spread']:.1%}, compile {row['compile_s']:.1f} s{peak}"
    )


COLUMNS = (
    ("item", "item", "s"),
    ("batch", "batch", "d"),
    ("compile_s", "compile s", ".1f"),
    ("tokens_per_s", "tokens/s", ",.0f"),
    ("tflops", "TFLOP/s", ".1f"),
    ("mfu", "MFU", ".1%"),
    ("of_matmul_rate", "of matmul rate", ".0%"),
    ("spread", "spread", ".1%"),
    ("peak_gib", "peak GiB", ".1f"),
    ("predicted_peak_gib", "predicted GiB", ".1f"),
    ("power_w_mean", "mean W", ".0f"),
    ("error", "error", "s"),
)


def table(rows: list[dict[str, Any]]) -> str:
    """The measured rows as a Markdown table (profiles as their own lines below)."""
    lines = [" | ".join(title for _, title, _ in COLUMNS), " | ".join("---" for _ in COLUMNS)]
    notes = []
    for row in rows:
        if "breakdown" in row:
            notes.append(row_line(row))
            continue
        cells = []
        for key, _, fmt in COLUMNS:
            value = row.get(key)
            cells.append("" if value is None else format(value, fmt))
        lines.append(" | ".join(cells))
    return "\n".join([*lines, "", *notes])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default=DEFAULT_SHAPES, help="comma list of final shapes")
    parser.add_argument("--budget-s", type=float, default=225.0, help="stop starting items after")
    parser.add_argument("--device", default=None, help="cuda (default with a GPU) or cpu")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend")
    parser.add_argument(
        "--extras",
        default="profile,float8,cudnn-attention,student-final,student-start,max-autotune",
        help="what to measure on the fastest candidate, in order",
    )
    parser.add_argument("--max-batch", type=int, default=64, help="cap on the fitted batch")
    parser.add_argument("--trial-batch", type=int, default=2, help="batch of the memory trial")
    parser.add_argument("--requested-batch", type=int, default=32, help="the student's batch")
    parser.add_argument("--keep-cache", action="store_true", help="keep the usual compile cache")
    parser.add_argument("--json", type=Path, help="where to write the JSON")
    return parser.parse_args(argv)


def extra_items(
    best: ModelShape, best_row: dict[str, Any], args: argparse.Namespace, st: Settings
) -> Iterator[tuple[str, str, Callable[[], dict[str, Any]]]]:
    """(kind, label, measure) for each of ``--extras``, on the fastest candidate."""
    student = student_shape(best)

    def as_student(row: dict[str, Any]) -> dict[str, Any]:
        return row | {"final": False, "student_shape": True}

    table_ = {
        "profile": lambda: profile_row(best, best_row["batch"], st),
        "max-autotune": lambda: final_row(best, st, mode="max-autotune-no-cudagraphs"),
        "whole-model": lambda: final_row(best, st, whole=True),
        "student-final": lambda: as_student(final_row(student, st)),
        "student-start": lambda: student_start_row(student, args.requested_batch, st),
        "cudnn-attention": lambda: cudnn_row(best, st),
        "float8": lambda: float8_row(best, st),
    }
    labels = {
        "profile": f"profile {best.spec()}",
        "max-autotune": f"max-autotune {best.spec()}",
        "whole-model": f"whole model {best.spec()}",
        "student-final": f"student shape of {best.spec()}, final configuration",
        "student-start": f"student start, shape of {best.spec()}",
        "cudnn-attention": f"cuDNN attention {best.spec()}",
        "float8": f"FP8 tensorwise {best.spec()}",
    }
    for kind in [e for e in args.extras.split(",") if e]:
        if kind not in table_:
            print(f"unknown extra {kind!r}: use {', '.join(table_)}", flush=True)
            continue
        yield kind, labels[kind], table_[kind]


def conclusions(report: dict[str, Any], scale: str) -> list[str]:
    """The lines that decide notebook 07's final configuration."""
    rows = [r for r in report["rows"] if "tflops" in r]
    finals = [r for r in rows if r.get("final")]
    if not finals:
        return ["no final configuration ran"]
    fastest = max(finals, key=lambda r: r["tflops"])
    mfu = "n/a" if fastest.get("mfu") is None else f"{fastest['mfu']:.0%}"
    lines = [
        f"{scale}; fastest final configuration: {fastest['item']} ({fastest['compile']}), "
        f"{fastest['tflops']:.1f} model TFLOP/s (target {TARGET_TFLOPS:.0f}), MFU {mfu} of the "
        f"data-sheet dense peak, {fastest['of_matmul_rate']:.0%} of the matmul rate measured "
        f"here; model FLOPs: {MODEL_FLOPS_CONVENTION}",
        f"notebook 07 at this shape: JUPYTER_GPU_CAPSTONE_SHAPE={fastest['shape']}",
    ]
    regional = [
        r for r in finals if r["shape"] == fastest["shape"] and r["compile"] == "regional default"
    ]
    tuned = [r for r in finals if "max-autotune" in r["compile"]]
    if regional and tuned:
        gain = tuned[0]["tflops"] / regional[0]["tflops"] - 1
        lines.append(
            f"max-autotune: {gain:+.1%} over the default mode, for "
            f"{tuned[0]['compile_s']:.0f} s of compile (default: {regional[0]['compile_s']:.0f} "
            "s); JUPYTER_GPU_CAPSTONE_AUTOTUNE=0 "
            "leaves it out of the notebook"
        )
    fp8 = next((r for r in rows if r.get("float8")), None)
    if regional and fp8 is not None:
        lines.append(
            f"FP8 (torchao {fp8.get('torchao')}, tensorwise): {fp8['tflops']:.1f} model TFLOP/s, "
            f"{fp8['tflops'] / regional[0]['tflops'] - 1:+.1%} over bf16 at the same shape "
            f"(target {TARGET_TFLOPS:.0f}; the notebook keeps it only with its loss within 2 %)"
        )
    cudnn = next((r for r in rows if r.get("cudnn")), None)
    if regional and cudnn is not None:
        lines.append(
            f"cuDNN attention: {cudnn['tflops'] / regional[0]['tflops'] - 1:+.1%} over the default "
            "choice of SDPA kernel (notebook 07 times it as its own row, interleaved)"
        )
    start_row = next((r for r in rows if r.get("student_start")), None)
    if start_row is not None:
        lines.append(
            f"over the student's start ({start_row['tokens_per_s']:,.0f} tokens/s at batch "
            f"{start_row['batch']}, OOM at {start_row['out_of_memory_at']}): "
            f"{fastest['tokens_per_s'] / start_row['tokens_per_s']:.1f}x tokens/s (target 10x)"
        )
    student = next((r for r in rows if r.get("student_shape")), None)
    if student is not None:
        lines.append(
            f"the aligned shape over the student's, same configuration: "
            f"{fastest['tflops'] / student['tflops']:.2f}x TFLOP/s"
        )
    if report["skipped"]:
        lines.append("skipped for the budget: " + "; ".join(report["skipped"]))
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.keep_cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="capstone-probe-cache-")
    start = time.perf_counter()
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "none (CPU)"
    when = time.strftime("%Y-%m-%d %H:%M")
    print(f"GPU: {gpu}; torch {torch.__version__}, CUDA {torch.version.cuda}; {when}", flush=True)
    set_tf32(False)  # strict fp32 for the student's start; the final configuration is 16-bit
    dtype = sixteen_bit(device)
    dtype_name = {torch.bfloat16: "bf16", torch.float16: "fp16", None: "fp32"}[dtype]
    report: dict[str, Any] = {
        "gpu": gpu,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": when,
        "cpus": cpu_count(),
        "flops": MODEL_FLOPS_CONVENTION,
        "dtype": dtype_name,
        "rows": [],
        "skipped": [],
    }

    def attempt(kind: str, label: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        left = args.budget_s - (time.perf_counter() - start)
        if left < ESTIMATE_S.get(kind, 20):
            report["skipped"].append(f"{label} ({left:.0f} s left)")
            print(f"skipped {label}: {left:.0f} s left of --budget-s", flush=True)
            return None
        try:
            row = fn()
        except Exception as exc:  # one failing item must not lose the others' figures
            traceback.print_exc()
            row = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        finally:
            free(device)
        row = {"item": label} | row
        report["rows"].append(row)
        print(row_line(row), flush=True)
        write_json("capstone_probe.json", report, indent=1, path=args.json)
        return row

    size, seconds = (8192, 2.0) if device == "cuda" else (256, 0.2)
    matmul_rate = format_matmul_rate(dtype_name, device=device, size=size, seconds=seconds)
    peak = peak_for(gpu if device == "cuda" else "CPU", dtype_name)
    report["matmul_rate"] = {"tflops": matmul_rate.tflops, "describe": matmul_rate.describe()}
    report["peak"] = {"dense_tflops": peak.dense_tflops, "describe": peak.describe()}
    print(matmul_rate.describe(), flush=True)
    print(peak.describe(), flush=True)
    st = Settings(
        device, dtype, args.backend, peak, matmul_rate.tflops, args.max_batch, args.trial_batch
    )
    candidates = []
    for spec in args.shapes.split(","):
        shape = final_shape_from_spec(spec)
        row = attempt("candidate", f"candidate {spec}", lambda s=shape: final_row(s, st))
        if row is not None and "error" not in row:
            candidates.append((row, shape))
    if candidates:
        best_row, best = max(candidates, key=lambda c: c[0]["tflops"])
        for kind, label, fn in extra_items(best, best_row, args, st):
            attempt(kind, label, fn)
    print("\n" + table(report["rows"]) + "\n")
    scale = (
        f"data-sheet dense {dtype_name} peak {peak.dense_tflops:g} TFLOP/s"
        if peak.dense_tflops is not None
        else "no data-sheet peak"
    )
    scale += f", the matmul rate measured here {matmul_rate.tflops:.1f} TFLOP/s ({size}^3)"
    report["conclusions"] = conclusions(report, scale)
    print("\n".join(report["conclusions"]))
    report["elapsed_s"] = time.perf_counter() - start
    out = write_json("capstone_probe.json", report, indent=1, path=args.json)
    print(f"took {report['elapsed_s']:.0f} s" + (f"; wrote {out}" if out else ""))
    return 0 if candidates else 1


if __name__ == "__main__":
    raise SystemExit(main())
