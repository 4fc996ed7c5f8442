"""Compile a small model in a fresh process, for notebook 06: ``python -m`` this module.

Prints one JSON line: the seconds of each call (the first includes compiling), how many graphs
dynamo compiled, and, with ``--budget``, whether the cache directory outgrew that many bytes
(the run stops there, as a full disk would stop it). The cache directory is the one torch
resolves (``TORCHINDUCTOR_CACHE_DIR``, set by the caller).

    python -m jupyter_gpu.tutorials.compile_probe --sizes 64,96 --dynamic static --device cuda
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main(argv: list[str] | None = None) -> int:
    """Run the probe; see the module's docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="64", help="comma list of batch sizes, in call order")
    parser.add_argument(
        "--dynamic",
        choices=["static", "auto", "mark", "dynamic"],
        default="auto",
        help="static: dynamic=False; auto: torch's default; mark: mark_dynamic on the batch "
        "dimension; dynamic: dynamic=True",
    )
    parser.add_argument("--mode", default="default", help="torch.compile mode")
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--budget", type=int, help="stop once the cache holds more bytes")
    args = parser.parse_args(argv)

    import torch

    from jupyter_gpu.sampling.compile_cache import inductor_cache_dir, scan_dir

    torch.manual_seed(0)
    width = args.width
    model = torch.nn.Sequential(
        torch.nn.Linear(width, 4 * width),
        torch.nn.GELU(),
        torch.nn.Linear(4 * width, width),
        torch.nn.LayerNorm(width),
    ).to(args.device)
    dynamic = {"static": False, "auto": None, "mark": None, "dynamic": True}[args.dynamic]
    mode = None if args.mode == "default" else args.mode
    compiled = torch.compile(model, backend=args.backend, dynamic=dynamic, mode=mode)
    cache = inductor_cache_dir()
    seconds, full_after = [], None
    graphs_before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    with torch.no_grad():
        for i, n in enumerate(int(s) for s in args.sizes.split(",")):
            x = torch.randn(n, width, device=args.device)
            if args.dynamic == "mark":
                torch._dynamo.mark_dynamic(x, 0)
            if args.device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            compiled(x)
            if args.device == "cuda":
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - start)
            if args.budget is not None and scan_dir(cache)[1] > args.budget:
                full_after = i + 1
                break
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs_before
    _, size, files = scan_dir(cache)
    print(  # noqa: T201  # the probe's one line of output, read by the notebook
        json.dumps(
            {
                "seconds": seconds,
                "graphs": graphs,
                "cache_dir": cache,
                "cache_bytes": size,
                "cache_files": files,
                "full_after": full_after,
                "pid": os.getpid(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
