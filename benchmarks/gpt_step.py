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
Figures are medians of --runs synchronised steps after --warmup untimed ones.

    python benchmarks/gpt_step.py               # the default candidates, ~3 min on an H200
    python benchmarks/gpt_step.py --sizes notebook,gpt2-1024x12 --runs 20
    python benchmarks/gpt_step.py --device cpu --sizes tiny --runs 2   # a dry run on CPU

Writes a JSON copy of the table to $OUT/gpt_step.json when OUT is set (or --json PATH).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a source tree without installing the package

import torch  # noqa: E402 (after the path set-up above)

from jupyter_gpu.tutorials.corpus import load_corpus, random_batch  # noqa: E402 (as above)
from jupyter_gpu.tutorials.flops import (  # noqa: E402 (as above)
    gpt_train_flops_per_token,
    mlp_train_flops_per_sample,
    tflops,
)
from jupyter_gpu.tutorials.gpt import GPT, GPTConfig  # noqa: E402 (as above)
from jupyter_gpu.tutorials.mlp import launch_bound_mlp, mlp_widths  # noqa: E402 (as above)
from jupyter_gpu.tutorials.presets import GPT_RUNS  # noqa: E402 (as above)
from jupyter_gpu.tutorials.timing import time_calls, time_first_call  # noqa: E402 (as above)
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


def measure_gpt(
    size: Size, config: str, args: argparse.Namespace, tokens: torch.Tensor, batches: str = "fixed"
) -> dict:
    """One config's step. ``batches``: ``fixed`` times one batch over and over; ``fresh`` draws
    a new one each step with ``random_batch``, as the notebooks' ``train_step`` does."""
    device = args.device
    compiled, precision, attention = parse_config(config)
    torch.manual_seed(0)
    model = GPT(size.config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=device == "cuda")
    gen = torch.Generator().manual_seed(0)
    x, y = random_batch(tokens, size.batch, size.config.context, gen)
    set_tf32(precision == "tf32")
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

    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    first_s = time_first_call(step, device=device)
    slow = precision in ("fp32", "tf32")
    runs = max(2, args.runs // 3) if slow else args.runs
    # The GPU's clocks and power meanwhile: a power-capped or hot GPU clocks down, which tells
    # a slower GPU from a slower program when two runs' figures differ. Only when the step runs
    # on the GPU: its clocks say nothing about a run on the CPU.
    clocks = None
    if device == "cuda":
        with GpuWatch() as watch, watch.window("timed"):
            timing = time_calls(step, runs=runs, warmup=args.warmup, device=device)
        clocks = watch.stats("timed")
    else:
        timing = time_calls(step, runs=runs, warmup=args.warmup, device=device)
    loss = float(step().detach())
    tokens_per_step = size.batch * size.config.context
    flops = gpt_train_flops_per_token(size.config) * tokens_per_step
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else None
    set_tf32(False)
    return {
        "size": size.name,
        "config": config,
        "batches": batches,
        "step_ms": timing.median_s * 1e3,
        "min_ms": timing.min_s * 1e3,
        "runs": timing.runs,
        "warmup": timing.warmup,
        "first_step_s": first_s,
        "tokens_per_s": timing.rate(tokens_per_step),
        "tflops": tflops(flops, timing.median_s),
        "peak_gib": peak / 2**30 if peak is not None else None,
        "loss": loss,
        "sm_clock_mhz_min": clocks.sm_clock_mhz_min if clocks else None,
        "sm_clock_mhz_max": clocks.sm_clock_mhz_max if clocks else None,
        "power_w_mean": clocks.power_w_mean if clocks else None,
        "temperature_c_max": clocks.temperature_c_max if clocks else None,
    }


def measure_mlp(mode: str, depth: int, args: argparse.Namespace) -> dict:
    device = args.device
    torch.manual_seed(0)
    model = launch_bound_mlp(args.mlp_width, depth).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=device == "cuda")
    x = torch.randn(args.mlp_batch, args.mlp_width, device=device)
    y = torch.randint(0, 10, (args.mlp_batch,), device=device)
    net = model if mode == "eager" else torch.compile(model, mode=mode)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        if mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    first_s = time_first_call(step, device=device)
    timing = time_calls(step, runs=args.mlp_runs, warmup=max(args.warmup, 5), device=device)
    flops = mlp_train_flops_per_sample(mlp_widths(args.mlp_width, depth)) * args.mlp_batch
    return {
        "config": mode,
        "depth": depth,
        "step_ms": timing.median_s * 1e3,
        "min_ms": timing.min_s * 1e3,
        "runs": timing.runs,
        "first_step_s": first_s,
        "tflops": tflops(flops, timing.median_s),
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
    parser.add_argument("--runs", type=int, default=10, help="timed steps (fp32/tf32 use a third)")
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
    parser.add_argument("--mlp-runs", type=int, default=50)
    parser.add_argument(
        "--json", type=Path, help="where to write the JSON (default $OUT/gpt_step.json)"
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

    rows: list[dict] = []
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
        for config, batches in [(c, b) for c in configs for b in args.batches.split(",")]:
            try:
                row = measure_gpt(size, config, args, tokens, batches)
            except Exception as exc:  # one failing config must not lose the others' figures
                traceback.print_exc()
                row = {"size": name, "config": config, "batches": batches}
                row["error"] = f"{type(exc).__name__}: {exc}"
            free_memory(args.device)
            row["params"] = n
            rows.append(row)
            if "error" not in row:
                clock = (
                    f"  SM {row['sm_clock_mhz_min']}-{row['sm_clock_mhz_max']} MHz, "
                    f"{row['power_w_mean']:.0f} W"
                    if row["sm_clock_mhz_min"] is not None
                    else ""
                )
                print(
                    f"  {config:13s} {batches:5s} {row['step_ms']:8.1f} ms  "
                    f"{row['tokens_per_s'] / 1e3:7.0f}k tok/s "
                    f"{row['tflops']:6.1f} TFLOP/s  peak {row['peak_gib'] or 0:5.1f} GiB  "
                    f"first step {row['first_step_s']:5.1f} s  loss {row['loss']:.3f}{clock}",
                    flush=True,
                )
            else:
                print(f"  {config:13s} {batches:5s} FAILED: {row['error']}", flush=True)

    # Speedups and target checks per size.
    checks = []
    for name in args.sizes.split(","):
        # the targets are checked on the first batch source asked for
        first = args.batches.split(",")[0]
        by = {
            r["config"]: r
            for r in rows
            if r["size"] == name and r["batches"] == first and "error" not in r
        }
        if "fp32" in by and "bf16" in by:
            ratio = by["bf16"]["tokens_per_s"] / by["fp32"]["tokens_per_s"]
            checks.append((name, "bf16 / eager fp32", ratio, TARGET_BF16_OVER_FP32))
        if "bf16" in by and "compile-bf16" in by:
            ratio = by["compile-bf16"]["tokens_per_s"] / by["bf16"]["tokens_per_s"]
            checks.append((name, "compile+bf16 / eager bf16", ratio, TARGET_COMPILE_OVER_BF16))
        if "compile-bf16" in by:
            checks.append(
                (name, "compile+bf16 TFLOP/s", by["compile-bf16"]["tflops"], TARGET_COMPILE_TFLOPS)
            )

    mlp_rows: list[dict] = []
    for depth in [] if args.skip_mlp else [int(d) for d in args.mlp_depths.split(",")]:
        print(
            f"\n== launch-bound MLP: {depth} layers of {args.mlp_width}, batch {args.mlp_batch}",
            flush=True,
        )
        modes = ["eager", "default"] + (["reduce-overhead"] if args.device == "cuda" else [])
        for mode in modes:
            try:
                row = measure_mlp(mode, depth, args)
            except Exception as exc:  # keep the other modes' figures
                traceback.print_exc()
                row = {"config": mode, "depth": depth, "error": f"{type(exc).__name__}: {exc}"}
            free_memory(args.device)
            mlp_rows.append(row)
            if "error" not in row:
                print(
                    f"  {mode:16s} {row['step_ms']:.3f} ms/step (min {row['min_ms']:.3f}), "
                    f"first step {row['first_step_s']:.1f} s",
                    flush=True,
                )
        by = {r["config"]: r for r in mlp_rows if "error" not in r and r["depth"] == depth}
        for base in ("eager", "default"):
            if base in by and "reduce-overhead" in by:
                ratio = by[base]["step_ms"] / by["reduce-overhead"]["step_ms"]
                label = "compile default" if base == "default" else base
                checks.append(
                    (f"mlp-{depth}", f"reduce-overhead / {label}", ratio, TARGET_REDUCE_OVERHEAD)
                )

    print("\n## GPT train step (median of timed steps, CUDA synchronised)\n")
    print(
        table(
            rows,
            [
                ("size", "size", "s"),
                ("config", "config", "s"),
                ("batches", "batches", "s"),
                ("step_ms", "ms/step", ".1f"),
                ("tokens_per_s", "tokens/s", ",.0f"),
                ("tflops", "TFLOP/s", ".1f"),
                ("peak_gib", "peak GiB", ".1f"),
                ("first_step_s", "first step s", ".1f"),
                ("runs", "runs", "d"),
                ("sm_clock_mhz_min", "SM MHz min", "d"),
                ("sm_clock_mhz_max", "SM MHz max", "d"),
                ("power_w_mean", "mean W", ".0f"),
                ("error", "error", "s"),
            ],
        )
    )
    if mlp_rows:
        print("\n## launch-bound MLP\n")
        print(
            table(
                mlp_rows,
                [
                    ("depth", "layers", "d"),
                    ("config", "mode", "s"),
                    ("step_ms", "ms/step", ".3f"),
                    ("min_ms", "min ms", ".3f"),
                    ("first_step_s", "first step s", ".1f"),
                    ("runs", "runs", "d"),
                    ("error", "error", "s"),
                ],
            )
        )
    print("\n## targets (one H200)\n")
    print("size | figure | measured | target | met")
    print("--- | --- | --- | --- | ---")
    for name, what, value, target in checks:
        print(f"{name} | {what} | {value:.2f} | >= {target} | {'yes' if value >= target else 'NO'}")
    print(f"\ntook {time.perf_counter() - start:.0f} s")

    out = args.json or (
        Path(os.environ["OUT"]) / "gpt_step.json" if os.environ.get("OUT") else None
    )
    if out:
        out.write_text(
            json.dumps(
                {
                    "gpu": gpu,
                    "torch": torch.__version__,
                    "cuda": torch.version.cuda,
                    "date": time.strftime("%Y-%m-%d"),
                    "gpt": rows,
                    "mlp": mlp_rows,
                    "checks": [
                        dict(zip(("size", "figure", "value", "target"), c, strict=True))
                        for c in checks
                    ],
                },
                indent=1,
            )
        )
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
