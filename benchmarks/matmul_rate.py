"""The GPU's matmul figures side by side: the data-sheet peak, a burst, and sustained rates.

    python benchmarks/matmul_rate.py              # one GPU, bf16: about 15 s on an H200
    python benchmarks/matmul_rate.py --dtype fp16 --batch 32
    python benchmarks/matmul_rate.py --device cpu --size 256 --seconds 0.3 \\
        --shape d128-hd64-l2-t64 --batch 2      # a dry run without a GPU

Notebook 07 used to divide model FLOPs by "the ceiling": the best median of 3 runs of 10 square
8192^3 products (about 14 ms of work on an H200), which read 792.9 TFLOP/s in a run whose own
GEMMs Inductor timed at 804-812, while notebook 00's 2 s loop read 665. This prints, for one
dtype, in this order:

1. the data-sheet dense peak of this GPU (``jupyter_gpu.measure.peaks``; none for a GPU not in
   the table), the denominator of MFU;
2. that burst, timed as the notebook timed it (``perf_counter`` around 10 products queued
   between two synchronisations, median of 3 runs after 2 warm-up calls), on a cool GPU;
3. the square product sustained for ``--seconds`` (2 s) with the one timing method
   (``jupyter_gpu.measure.matmul_rate``: CUDA events, rounds, an interval, the SM clock read);
4. the capstone's own GEMMs (``--shape``, the 80 GB tier's final shape by default, at
   ``--batch`` sequences: ``ModelShape.gemms``, forward and both gradients of each Linear in
   torch's layouts), sustained the same way; then each of its shapes' rates;
5. the burst again, on the GPU the sustained runs warmed.

Each rate is also printed as a share of the data-sheet peak. Writes ``matmul_rate.json`` to
``$JUPYTER_GPU_OUT`` (else ``$OUT``) when set.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a source tree without installing the package

import torch  # noqa: E402 (after the path set-up above)

from benchmarks.outputs import write_json  # noqa: E402 (after the path set-up)
from jupyter_gpu.magics.probes.precision import Tf32Settings, set_tf32  # noqa: E402
from jupyter_gpu.measure import time_back_to_back  # noqa: E402
from jupyter_gpu.measure.gemms import square_gemm  # noqa: E402
from jupyter_gpu.measure.matmul_rate import MatmulRate, measure_matmul_rate  # noqa: E402
from jupyter_gpu.measure.peaks import peak_for  # noqa: E402
from jupyter_gpu.tutorials.capstone.shapes import final_shape_from_spec  # noqa: E402

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "tf32", "fp32"])
    parser.add_argument("--size", type=int, default=8192, help="square product's size")
    parser.add_argument("--seconds", type=float, default=2.0, help="each sustained run")
    parser.add_argument("--shape", default="d2048-hd128-l8-t2048", help="capstone final shape")
    parser.add_argument("--batch", type=int, default=64, help="capstone sequences per step")
    parser.add_argument("--device", default=None, help="default: cuda if available")
    return parser.parse_args(argv)


def burst_tflops(size: int, dtype: str, device: str) -> dict[str, float]:
    """Notebook 07's old "ceiling": 3 runs of 10 products back to back, their median."""
    torch_dtype = TORCH_DTYPES["fp32" if dtype == "tf32" else dtype]
    a = torch.randn(size, size, device=device, dtype=torch_dtype)
    b = torch.randn(size, size, device=device, dtype=torch_dtype)
    with torch.autocast(torch.device(device).type, enabled=False):
        timing = time_back_to_back(lambda: a @ b, calls=10, runs=3, warmup=2, device=device)
    return {
        "tflops": 2 * size**3 / timing.median_s / 1e12,
        "work_s": timing.median_s * 10,
        "runs_tflops": [2 * size**3 / t / 1e12 for t in timing.times_s],
    }


def rate_record(rate: MatmulRate) -> dict[str, Any]:
    return {
        "tflops": rate.tflops,
        "interval_tflops": [rate.low_tflops, rate.high_tflops],
        "level": rate.level,
        "rounds": rate.rounds,
        "timed_s": rate.timed_s,
        "sustained": rate.sustained,
        "clock": rate.clock,
        "sm_clock_mhz": rate.machine.sm_clock_mhz,
        "notes": list(rate.machine.notes),
        "gemms": [
            {"shape": g.describe(), "flops": g.flops, "count": g.count, "tflops": t}
            for g, t in zip(rate.gemms, rate.gemm_tflops, strict=True)
        ],
        "describe": rate.describe(),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else "CPU"
    print(f"device: {name}; torch {torch.__version__}, CUDA {torch.version.cuda}", flush=True)
    peak = peak_for(name, args.dtype)
    shape = final_shape_from_spec(args.shape)
    report: dict[str, Any] = {
        "device": name,
        "dtype": args.dtype,
        "torch": torch.__version__,
        "peak": {
            "dense_tflops": peak.dense_tflops,
            "describe": peak.describe(),
            "source": None if peak.gpu is None else peak.gpu.source.url,
        },
    }
    rows: list[tuple[str, float, str]] = []
    if peak.dense_tflops is not None:
        rows.append(("data-sheet dense peak", peak.dense_tflops, peak.describe()))
    else:
        print(f"no data-sheet peak: {peak.why_none}", flush=True)
    saved = Tf32Settings.read()
    set_tf32(args.dtype == "tf32")  # strict fp32 unless tf32 is what is measured
    try:
        burst = burst_tflops(args.size, args.dtype, device)
        report["burst_cool"] = burst
        rows.append(
            (
                f"burst, {args.size}^3: 3 runs of 10 (notebook 07's old 'ceiling')",
                burst["tflops"],
                f"median run of {burst['work_s'] * 1e3:.1f} ms of work; runs "
                + ", ".join(f"{r:.1f}" for r in burst["runs_tflops"]),
            )
        )
        square = measure_matmul_rate(
            [square_gemm(args.size, args.dtype)], device=device, seconds=args.seconds
        )
        report["square_sustained"] = rate_record(square)
        rows.append((f"sustained, {args.size}^3", square.tflops, square.describe()))
        gemms = shape.gemms(args.batch, args.dtype)
        model = measure_matmul_rate(gemms, device=device, seconds=args.seconds)
        report["capstone_sustained"] = rate_record(model) | {
            "shape": shape.spec(),
            "batch": args.batch,
        }
        rows.append(
            (
                f"sustained, the capstone's GEMMs ({shape.spec()}, batch {args.batch})",
                model.tflops,
                model.describe(),
            )
        )
        hot = burst_tflops(args.size, args.dtype, device)
        report["burst_warm"] = hot
        rows.append(
            (
                f"burst again, {args.size}^3, after the sustained runs",
                hot["tflops"],
                f"median run of {hot['work_s'] * 1e3:.1f} ms of work",
            )
        )
    finally:
        saved.apply()
    print()
    print(f"{'figure':<72} {'TFLOP/s':>9} {'of peak':>8}")
    for label, tflops, _ in rows:
        share = "" if peak.dense_tflops is None else f"{tflops / peak.dense_tflops:.0%}"
        print(f"{label:<72} {tflops:>9.1f} {share:>8}")
    print()
    for label, _, how in rows:
        print(f"- {label}: {how}")
    print(f"\nthe capstone's GEMMs, each ({args.dtype}, sustained rounds, median):")
    for gemm, tflops in zip(model.gemms, model.gemm_tflops, strict=True):
        print(f"  {tflops:8.1f} TFLOP/s  {gemm.describe()}")
    print(f"  median shape: {statistics.median(model.gemm_tflops):.1f} TFLOP/s")
    path = write_json("matmul_rate.json", report, indent=1)
    if path:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
