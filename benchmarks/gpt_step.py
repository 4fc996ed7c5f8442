"""Measure the tutorial GPT's training step (and the launch-bound MLP) under each precision.

For each candidate model size (``llama`` style: RMSNorm, RoPE, SwiGLU, as the notebooks use;
``gpt2`` style: LayerNorm, learned positions, GELU): eager fp32, eager tf32, eager bf16
autocast and torch.compile + bf16 autocast; for deep narrow MLPs at batch 32: eager, compile
default and compile reduce-overhead. Prints step time, tokens/s, model TFLOP/s, peak memory
and speedups, and checks the tutorial targets on one H200 (bf16 >= 2.5x eager fp32;
compile + bf16 >= 1.25x eager bf16 and >= 450 TFLOP/s; reduce-overhead >= 1.5x eager on the
MLP).
The first size (``notebook``, the notebooks' GPU preset) gets every config; the others only
bf16 and compile + bf16 (``--all-configs`` for all).

Model FLOPs per token = 6 N + 12 L d T (N: weights in matrix products, the tied output layer
counted once; L layers; d width; T sequence length); see jupyter_gpu/tutorials/flops.py.

The one timing method (``jupyter_gpu.measure.compare``): each size's configs are built and run
once (their compile and first step timed on their own), then timed together in --rounds
interleaved rounds, each round one block of every config, the order alternating. A step time
is the per-call median over the rounds, with the interval of that median; a ratio is the median
of the rounds' paired ratios, with its interval; a target is met only where the interval's low
end reaches it. (Until 2026-12-05 each config was timed alone, one after the other, and the
targets were judged on the medians' ratio, with no interval.) The peak memory is each config's
own: the allocator's peak in its first step above what was allocated before its model was built.

    python benchmarks/gpt_step.py               # the default candidates, ~3 min on an H200
    python benchmarks/gpt_step.py --sizes notebook,gpt2-1024x12 --rounds 20
    python benchmarks/gpt_step.py --device cpu --sizes tiny --rounds 8 --skip-mlp  # a CPU dry run

Writes a JSON copy of the table to $JUPYTER_GPU_OUT (else $OUT)/gpt_step.json when set (or --json
PATH).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a source tree without installing the package

import torch  # noqa: E402 (after the path set-up above)

from benchmarks.outputs import write_json  # noqa: E402 (after the path set-up)
from jupyter_gpu.measure import Comparison, Variant, compare, time_first_call  # noqa: E402 (as above)
from jupyter_gpu.measure.interval import rounds_interval  # noqa: E402 (as above)
from jupyter_gpu.tutorials.corpus import load_corpus, random_batch  # noqa: E402 (as above)
from jupyter_gpu.tutorials.flops import (  # noqa: E402 (as above)
    gpt_train_flops_per_token,
    mlp_train_flops_per_sample,
    tflops,
)
from jupyter_gpu.tutorials.gpt import GPT, GPTConfig  # noqa: E402 (as above)
from jupyter_gpu.tutorials.mlp import launch_bound_mlp, mlp_widths  # noqa: E402 (as above)
from jupyter_gpu.tutorials.presets import GPT_RUNS  # noqa: E402 (as above)
from jupyter_gpu.tutorials.watch import GpuWatch  # noqa: E402 (as above)


@dataclass(frozen=True)
class Size:
    name: str
    config: GPTConfig
    batch: int


def _size(
    name: str, d: int, layers: int, heads: int, context: int, batch: int, style: str = "llama"
) -> Size:
    config = GPTConfig(256, context, layers, heads, d, style=style)  # type: ignore[arg-type]  # "llama" or "gpt2"
    return Size(name, config, batch)


# name: [style-]width x layers. Heads of 128 where the width allows (flash attention likes them).
SIZES = {
    s.name: s
    for s in (
        Size("notebook", GPT_RUNS["gpu"].config, GPT_RUNS["gpu"].batch),  # 01/02/03's GPU size
        _size("llama-768x12", 768, 12, 6, 1024, 16),
        _size("llama-1024x12", 1024, 12, 8, 1024, 16),
        _size("llama-1024x16", 1024, 16, 8, 1024, 16),
        _size("llama-1280x12", 1280, 12, 10, 1024, 16),
        _size("llama-1536x8", 1536, 8, 12, 1024, 16),
        _size("gpt2-768x12", 768, 12, 12, 1024, 16, "gpt2"),  # GPT-2 small's body
        _size("gpt2-1024x12", 1024, 12, 8, 1024, 16, "gpt2"),
        _size("gpt2-1536x8", 1536, 8, 12, 1024, 16, "gpt2"),
        _size("tiny", 128, 2, 2, 64, 4),  # CPU dry run only
    )
}
# The first size gets every config; the others only what decides between sizes (bf16 and
# compile + bf16), which keeps the default run near 3 minutes on an H200.
DEFAULT_SIZES = "notebook,gpt2-1024x12,llama-768x12,llama-1536x8"
DECIDING_CONFIGS = ("bf16", "compile-bf16")
# [compile-]{fp32,tf32,bf16,fp16}[-cudnn|-flash]: the suffix pins the attention kernel.
CONFIGS = ("fp32", "tf32", "bf16", "bf16-cudnn", "compile-bf16")
DTYPES = {"fp32": None, "tf32": None, "bf16": torch.bfloat16, "fp16": torch.float16}

TARGET_BF16_OVER_FP32 = 2.5
TARGET_COMPILE_OVER_BF16 = 1.25
TARGET_COMPILE_TFLOPS = 450.0
TARGET_REDUCE_OVERHEAD = 1.5
#: Interleaved rounds a size's configs are timed in (as the other benchmarks and notebooks).
ROUNDS = 12
#: The GPU's clocks and power beside each row; empty on the CPU.
CLOCK_KEYS = ("sm_clock_mhz_min", "sm_clock_mhz_max", "power_w_mean", "temperature_c_max")


def set_tf32(enabled: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled


def free_memory(device: str) -> None:
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
    torch._dynamo.reset()  # drop compiled graphs (and their CUDA graph pools) between configs


def parse_config(config: str) -> tuple[bool, str, str | None]:
    """``compile-bf16-cudnn`` -> (compiled, "bf16", "cudnn")."""
    compiled = config.startswith("compile-")
    rest = config.removeprefix("compile-")
    precision, _, attention = rest.partition("-")
    if precision not in DTYPES or attention not in ("", "cudnn", "flash"):
        raise ValueError(f"unknown config {config!r}")
    return compiled, precision, attention or None


def attention_context(attention: str | None) -> contextlib.AbstractContextManager[object]:
    if attention is None:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[attention]
    return sdpa_kernel(backend)


@dataclass
class Prepared:
    """One config's step, built and run once (the compile happens here), ready to be compared."""

    name: str
    row: dict
    variant: Variant
    flops_per_call: float
    items_per_call: int


def measure_peak(step: Callable[[], object], device: str, before: int) -> tuple[float, int | None]:
    """The first call's seconds, and the allocator's peak above ``before`` (bytes; ``None`` on
    the CPU): the config's weights, optimizer state and activations, not the other configs'."""
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    first_s = time_first_call(step, device=device)
    peak = torch.cuda.max_memory_allocated() - before if device == "cuda" else None
    return first_s, peak


def tf32_context(enabled: bool) -> Callable[[], contextlib.AbstractContextManager[object]]:
    """Around a variant's blocks: TF32 for matmuls and convolutions on or off, then as it was."""

    @contextlib.contextmanager
    def context() -> Iterator[None]:
        was = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        set_tf32(enabled)
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = was

    return context


def prepare_gpt(
    size: Size, config: str, args: argparse.Namespace, tokens: torch.Tensor, batches: str = "fixed"
) -> Prepared:
    """One config's step, its first call timed. ``batches``: ``fixed`` times one batch over and
    over; ``fresh`` draws a new one each step with ``random_batch``, as the notebooks'
    ``train_step`` does."""
    device = args.device
    compiled, precision, attention = parse_config(config)
    before = torch.cuda.memory_allocated() if device == "cuda" else 0
    torch.manual_seed(0)
    model = GPT(size.config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=device == "cuda")
    gen = torch.Generator().manual_seed(0)
    x, y = random_batch(tokens, size.batch, size.config.context, gen)
    dtype = DTYPES[precision]
    scaler = torch.amp.GradScaler(device) if precision == "fp16" else None
    net = torch.compile(model, mode=args.mode) if compiled else model
    device_type = torch.device(device).type

    def step() -> torch.Tensor:
        nonlocal x, y
        if batches == "fresh":
            x, y = random_batch(tokens, size.batch, size.config.context, gen)
        with (
            attention_context(attention),
            torch.autocast(device_type, dtype=dtype or torch.float32, enabled=dtype is not None),
        ):
            loss = net(x, y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    context = tf32_context(precision == "tf32")
    with context():
        first_s, peak = measure_peak(step, device, before)
    tokens_per_step = size.batch * size.config.context
    name = f"{config} {batches}"  # the comparison's name for it (gpt_checks reads it)
    row = {
        "size": size.name,
        "config": config,
        "batches": batches,
        "first_step_s": first_s,
        "peak_gib": peak / 2**30 if peak is not None else None,
    }
    flops = gpt_train_flops_per_token(size.config) * tokens_per_step
    return Prepared(name, row, Variant(step, context), flops, tokens_per_step)


def prepare_mlp(mode: str, depth: int, args: argparse.Namespace) -> Prepared:
    """The launch-bound MLP's step in one torch.compile mode (``eager``: none)."""
    device = args.device
    torch.manual_seed(0)
    model = launch_bound_mlp(args.mlp_width, depth).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=device == "cuda")
    x = torch.randn(args.mlp_batch, args.mlp_width, device=device)
    y = torch.randint(0, 10, (args.mlp_batch,), device=device)
    net = model if mode == "eager" else torch.compile(model, mode=mode)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> torch.Tensor:
        if mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    first_s = time_first_call(step, device=device)
    flops = mlp_train_flops_per_sample(mlp_widths(args.mlp_width, depth)) * args.mlp_batch
    row = {"config": mode, "depth": depth, "first_step_s": first_s}
    return Prepared(mode, row, Variant(step), flops, args.mlp_batch)


def compare_prepared(
    prepared: list[Prepared], args: argparse.Namespace, *, warmup: int
) -> tuple[Comparison, dict | None]:
    """Time the prepared steps in interleaved rounds (``jupyter_gpu.measure.compare``), and the
    GPU's clocks and power meanwhile (``None`` on the CPU: a GPU's clocks say nothing of a run
    there). A power-capped or hot GPU clocks down: that tells a slower GPU from a slower step."""
    variants = {p.name: p.variant for p in prepared}
    device = args.device

    def timed() -> Comparison:
        return compare(variants, device=device, warmup=warmup, rounds=args.rounds)

    if device != "cuda":
        return timed(), None
    with GpuWatch() as watch, watch.window("timed"):
        comparison = timed()
    stats = watch.stats("timed")
    return comparison, {key: getattr(stats, key) for key in CLOCK_KEYS}


def timed_row(p: Prepared, comparison: Comparison, clocks: dict | None) -> dict:
    """``p``'s row: its per-call median with the interval of that median over the rounds, the
    rates at both ends, and the loss one more step gives."""
    timing = comparison[p.name]
    low_s, high_s, _ = rounds_interval(list(timing.times_s))
    with p.variant.entered():  # tf32's setting, as in its rounds
        loss = float(p.variant.run().detach())  # type: ignore[attr-defined]  # a loss tensor
    return {
        **p.row,
        "step_ms": timing.median_s * 1e3,
        "step_ms_interval": [low_s * 1e3, high_s * 1e3],
        "runs": timing.runs,
        "calls_per_round": timing.calls_per_run,
        "warmup": timing.warmup,
        "tokens_per_s": timing.rate(p.items_per_call),
        "tflops": tflops(p.flops_per_call, timing.median_s),
        "tflops_interval": [tflops(p.flops_per_call, high_s), tflops(p.flops_per_call, low_s)],
        "loss": loss,
        **(clocks or dict.fromkeys(CLOCK_KEYS)),
    }


def measure_all(
    builds: Mapping[str, tuple[dict, Callable[[], Prepared]]],
    args: argparse.Namespace,
    *,
    warmup: int,
) -> tuple[list[dict], Comparison | None]:
    """Build each step (name -> its row's labels and its builder), then time those built together.

    One that fails to build is a row saying so: the others keep their figures. A comparison
    that fails leaves every row failed, with its first step's figures.
    """
    prepared, failed = [], []
    for labels, build in builds.values():
        try:
            prepared.append(build())
        except Exception as exc:  # one failing config must not lose the others' figures
            traceback.print_exc()
            failed.append({**labels, "error": f"{type(exc).__name__}: {exc}"})
    if not prepared:
        return failed, None
    try:
        comparison, clocks = compare_prepared(prepared, args, warmup=warmup)
    except Exception as exc:  # keep the first steps' figures, and say why there are no others
        traceback.print_exc()
        error = f"{type(exc).__name__}: {exc}"
        return [{**p.row, "error": error} for p in prepared] + failed, None
    return [timed_row(p, comparison, clocks) for p in prepared] + failed, comparison


def ratio_check(
    label: str, figure: str, comparison: Comparison, faster: str, slower: str, target: float
) -> dict | None:
    """``slower``'s time over ``faster``'s, paired round by round, judged on its interval's low
    end (``None`` where either was not timed)."""
    if faster not in comparison or slower not in comparison:
        return None
    ratio = comparison.ratio(faster, slower)
    return check_row(label, figure, ratio.value, (ratio.low, ratio.high), target)


def check_row(
    label: str, figure: str, value: float, interval: tuple[float, float], target: float
) -> dict:
    """A target met only where the interval's low end reaches it (the rule the notebooks keep)."""
    return {
        "size": label,
        "figure": figure,
        "value": value,
        "interval": list(interval),
        "target": target,
        "met": interval[0] >= target,
    }


def table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    head = " | ".join(title for _, title, _ in columns)
    lines = [head, " | ".join("---" for _ in columns)]
    for row in rows:
        cells = []
        for key, _, fmt in columns:
            value = row.get(key)
            cells.append("" if value is None else format(value, fmt))
        lines.append(" | ".join(cells))
    return "\n".join(lines)


def gpt_rows(args: argparse.Namespace, tokens: torch.Tensor) -> tuple[list[dict], list[dict]]:
    """Each size's configs compared in one run, and its targets judged."""
    rows: list[dict] = []
    checks: list[dict] = []
    sources = args.batches.split(",")
    for name in args.sizes.split(","):
        size = SIZES[name]
        if args.batch:
            size = Size(size.name, size.config, args.batch)
        n = sum(p.numel() for p in GPT(size.config).parameters())
        print(
            f"\n== {name}: {size.config.describe()}, batch {size.batch}, {n / 1e6:.0f} M params, "
            f"{gpt_train_flops_per_token(size.config) / 1e9:.2f} GFLOP/token",
            flush=True,
        )
        configs = args.configs.split(",")
        if name != args.sizes.split(",")[0] and not args.all_configs:
            configs = [c for c in configs if c in DECIDING_CONFIGS]
        builds = {
            f"{c} {b}": (
                {"size": name, "config": c, "batches": b},
                functools.partial(prepare_gpt, size, c, args, tokens, b),
            )
            for c in configs
            for b in sources
        }
        measured, comparison = measure_all(builds, args, warmup=args.warmup)
        free_memory(args.device)
        for row in measured:
            row["params"] = n
            print(gpt_line(row), flush=True)
        rows += measured
        if comparison is not None:
            checks += gpt_checks(name, measured, comparison, sources[0])
    return rows, checks


def gpt_line(row: dict) -> str:
    """One row as it is printed while the benchmark runs."""
    head = f"  {row['config']:13s} {row['batches']:5s}"
    if "error" in row:
        return f"{head} FAILED: {row['error']}"
    low, high = row["step_ms_interval"]
    clock = (
        f"  SM {row['sm_clock_mhz_min']}-{row['sm_clock_mhz_max']} MHz, {row['power_w_mean']:.0f} W"
        if row["sm_clock_mhz_min"] is not None
        else ""
    )
    peak = f"  peak {row['peak_gib']:5.1f} GiB" if row["peak_gib"] is not None else ""
    return (
        f"{head} {row['step_ms']:8.1f} ms ({low:.1f}-{high:.1f})  "
        f"{row['tokens_per_s'] / 1e3:7.0f}k tok/s {row['tflops']:6.1f} TFLOP/s{peak}  "
        f"first step {row['first_step_s']:5.1f} s  loss {row['loss']:.3f}{clock}"
    )


def gpt_checks(name: str, rows: list[dict], comparison: Comparison, source: str) -> list[dict]:
    """The size's targets, on the first batch source asked for."""
    label = {r["config"]: f"{r['config']} {source}" for r in rows if r["batches"] == source}
    checks = []
    if "fp32" in label and "bf16" in label:
        checks.append(
            ratio_check(
                name,
                "bf16 / eager fp32",
                comparison,
                label["bf16"],
                label["fp32"],
                TARGET_BF16_OVER_FP32,
            )
        )
    if "bf16" in label and "compile-bf16" in label:
        checks.append(
            ratio_check(
                name,
                "compile+bf16 / eager bf16",
                comparison,
                label["compile-bf16"],
                label["bf16"],
                TARGET_COMPILE_OVER_BF16,
            )
        )
    compiled = next(
        (r for r in rows if r["config"] == "compile-bf16" and r["batches"] == source), None
    )
    if compiled is not None and "error" not in compiled:
        low, high = compiled["tflops_interval"]
        checks.append(
            check_row(
                name, "compile+bf16 TFLOP/s", compiled["tflops"], (low, high), TARGET_COMPILE_TFLOPS
            )
        )
    return [c for c in checks if c is not None]


def mlp_rows(args: argparse.Namespace) -> tuple[list[dict], list[dict]]:
    """The launch-bound MLP's compile modes compared in one run per depth, and its targets."""
    rows: list[dict] = []
    checks: list[dict] = []
    for depth in [] if args.skip_mlp else [int(d) for d in args.mlp_depths.split(",")]:
        print(
            f"\n== launch-bound MLP: {depth} layers of {args.mlp_width}, batch {args.mlp_batch}",
            flush=True,
        )
        modes = ["eager", "default"] + (["reduce-overhead"] if args.device == "cuda" else [])
        builds = {
            mode: (
                {"config": mode, "depth": depth},
                functools.partial(prepare_mlp, mode, depth, args),
            )
            for mode in modes
        }
        measured, comparison = measure_all(builds, args, warmup=max(args.warmup, 5))
        free_memory(args.device)
        rows += measured
        for row in measured:
            if "error" in row:
                print(f"  {row['config']:16s} FAILED: {row['error']}", flush=True)
                continue
            low, high = row["step_ms_interval"]
            print(
                f"  {row['config']:16s} {row['step_ms']:.3f} ms/step ({low:.3f}-{high:.3f}), "
                f"first step {row['first_step_s']:.1f} s",
                flush=True,
            )
        if comparison is None:
            continue
        for base in ("eager", "default"):
            label = "compile default" if base == "default" else base
            check = ratio_check(
                f"mlp-{depth}",
                f"reduce-overhead / {label}",
                comparison,
                "reduce-overhead",
                base,
                TARGET_REDUCE_OVERHEAD,
            )
            if check is not None:
                checks.append(check)
    return rows, checks


def print_tables(rows: list[dict], mlp: list[dict], checks: list[dict], rounds: int) -> None:
    print(
        f"\n## GPT train step (per-call medians of {rounds} interleaved rounds, each config's "
        "interval beside it; CUDA events on a GPU)\n"
    )
    print(
        table(
            [{**r, "interval": span(r.get("step_ms_interval"), ".1f")} for r in rows],
            [
                ("size", "size", "s"),
                ("config", "config", "s"),
                ("batches", "batches", "s"),
                ("step_ms", "ms/step", ".1f"),
                ("interval", "95 % interval", "s"),
                ("tokens_per_s", "tokens/s", ",.0f"),
                ("tflops", "TFLOP/s", ".1f"),
                ("peak_gib", "peak GiB", ".1f"),
                ("first_step_s", "first step s", ".1f"),
                ("runs", "rounds", "d"),
                ("sm_clock_mhz_min", "SM MHz min", "d"),
                ("sm_clock_mhz_max", "SM MHz max", "d"),
                ("power_w_mean", "mean W", ".0f"),
                ("error", "error", "s"),
            ],
        )
    )
    if mlp:
        print("\n## launch-bound MLP\n")
        print(
            table(
                [{**r, "interval": span(r.get("step_ms_interval"), ".3f")} for r in mlp],
                [
                    ("depth", "layers", "d"),
                    ("config", "mode", "s"),
                    ("step_ms", "ms/step", ".3f"),
                    ("interval", "95 % interval", "s"),
                    ("calls_per_round", "calls a round", "d"),
                    ("first_step_s", "first step s", ".1f"),
                    ("runs", "rounds", "d"),
                    ("error", "error", "s"),
                ],
            )
        )
    print("\n## targets (one H200; met only where the interval's low end reaches the target)\n")
    print("size | figure | measured | interval | target | met")
    print("--- | --- | --- | --- | --- | ---")
    for c in checks:
        low, high = c["interval"]
        met = "yes" if c["met"] else ("NO" if c["value"] < c["target"] else "NO (interval below)")
        print(
            f"{c['size']} | {c['figure']} | {c['value']:.2f} | {low:.2f}-{high:.2f} | "
            f">= {c['target']} | {met}"
        )


def span(interval: list[float] | None, fmt: str) -> str | None:
    """``low-high`` in ``fmt`` (``None``: no interval, an empty cell)."""
    if interval is None:
        return None
    return f"{format(interval[0], fmt)}-{format(interval[1], fmt)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help=f"comma list of {sorted(SIZES)}")
    parser.add_argument(
        "--configs", default=",".join(CONFIGS), help="comma list of " + ",".join(CONFIGS)
    )
    parser.add_argument(
        "--batches",
        default="fixed",
        help="comma list of fixed (one batch, timed over and over) and fresh (a new "
        "random_batch each step, as the notebooks' train_step draws it)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=ROUNDS,
        help="interleaved rounds, each timing every config of a size once (12: the interval "
        "drops the two most extreme stretches of rounds on each side)",
    )
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--mode", default="default", help="torch.compile mode for the GPT")
    parser.add_argument("--batch", type=int, help="override every size's batch")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--all-configs", action="store_true", help="every config for every size, not the first only"
    )
    parser.add_argument("--skip-mlp", action="store_true")
    parser.add_argument("--mlp-width", type=int, default=1024)
    parser.add_argument("--mlp-depths", default="24,9", help="comma list of MLP depths")
    parser.add_argument("--mlp-batch", type=int, default=32)
    parser.add_argument(
        "--json",
        type=Path,
        help="where to write the JSON (default: gpt_step.json in $JUPYTER_GPU_OUT, else $OUT)",
    )
    args = parser.parse_args()

    start = time.perf_counter()
    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else "none (CPU)"
    print(
        f"GPU: {gpu}; torch {torch.__version__}, CUDA {torch.version.cuda}; "
        f"device {args.device}; {time.strftime('%Y-%m-%d %H:%M')}",
        flush=True,
    )
    corpus = load_corpus(8_000_000 if args.device == "cuda" else 200_000)
    tokens = corpus.train.to(args.device)
    print(corpus.describe(), flush=True)
    if args.device == "cuda":
        from torch.nn import attention

        impls = getattr(attention, "list_flash_attention_impls", list)()
        print(f"flash attention implementations: {impls or 'default only'}", flush=True)

    rows, checks = gpt_rows(args, tokens)
    mlp, mlp_checks = mlp_rows(args)
    checks += mlp_checks
    print_tables(rows, mlp, checks, args.rounds)
    print(f"\ntook {time.perf_counter() - start:.0f} s")

    out = write_json(
        "gpt_step.json",
        {
            "gpu": gpu,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "date": time.strftime("%Y-%m-%d"),
            "rounds": args.rounds,
            "gpt": rows,
            "mlp": mlp,
            "checks": checks,
        },
        indent=1,
        path=args.json,
    )
    if out:
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
