"""Compile a small model in a fresh process, for notebook 06: ``python -m`` this module.

:func:`run_probe` runs it from a notebook. Prints one JSON line: the seconds of each call
(the first includes compiling), how many graphs dynamo compiled, and, with ``--budget``,
whether the cache directory outgrew that many bytes (the run stops there, as a full disk would
stop it). The cache directory is the one torch resolves (``TORCHINDUCTOR_CACHE_DIR``, set by
the caller).

    python -m jupyter_gpu.tutorials.compile_probe --sizes 64,96 --dynamic static --device cuda
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def probe(
    *,
    sizes: list[int],
    dynamic: str = "auto",
    mode: str = "default",
    backend: str = "inductor",
    device: str = "cpu",
    width: int = 256,
    budget: int | None = None,
) -> dict[str, Any]:
    """Compile the MLP and call it at each batch size, in this process; see the module."""
    import torch

    from jupyter_gpu.compile_cache import inductor_cache_dir, scan_dir

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, 4 * width),
        torch.nn.GELU(),
        torch.nn.Linear(4 * width, width),
        torch.nn.LayerNorm(width),
    ).to(device)
    choice = {"static": False, "auto": None, "mark": None, "dynamic": True}[dynamic]
    compiled = torch.compile(
        model, backend=backend, dynamic=choice, mode=None if mode == "default" else mode
    )
    cache = inductor_cache_dir()
    seconds: list[float] = []
    full_after = None
    graphs_before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    with torch.no_grad():
        for i, n in enumerate(sizes):
            x = torch.randn(n, width, device=device)
            if dynamic == "mark":
                torch._dynamo.mark_dynamic(x, 0)
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            compiled(x)
            if device == "cuda":
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - start)
            if budget is not None and scan_dir(cache)[1] > budget:
                full_after = i + 1
                break
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs_before
    _, size, files = scan_dir(cache)
    return {
        "seconds": seconds,
        "graphs": graphs,
        "cache_dir": cache,
        "cache_bytes": size,
        "cache_files": files,
        "full_after": full_after,
        "pid": os.getpid(),
    }


def run_probe(cache: str | Path, *, fresh_process: bool = True, **options: Any) -> dict[str, Any]:
    """:func:`probe` with ``cache`` as ``TORCHINDUCTOR_CACHE_DIR``, in a fresh Python process.

    ``fresh_process=False`` runs it here instead (after ``torch._dynamo.reset()``): for the
    smoke tests, whose ``aot_eager`` backend writes no cache, where starting Python each time
    would only cost time.

    Raises:
        RuntimeError: the child process failed (its stderr is in the message).
    """
    if not fresh_process:
        import torch

        torch._dynamo.reset()
        saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
        try:
            return probe(**options)
        finally:
            if saved is None:
                os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved
    command = [sys.executable, "-m", "jupyter_gpu.tutorials.compile_probe"]
    for key, value in options.items():
        if value is None:
            continue
        text = ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
        command += [f"--{key}", text]
    env = {k: v for k, v in os.environ.items() if k != "TORCH_LOGS"}  # no log lines
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)  # noqa: S603  # our own module, this Python
    if done.returncode != 0:
        raise RuntimeError(f"the compile probe failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    """Run the probe from the command line; see the module's docstring."""
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
    result = probe(
        sizes=[int(s) for s in args.sizes.split(",")],
        dynamic=args.dynamic,
        mode=args.mode,
        backend=args.backend,
        device=args.device,
        width=args.width,
        budget=args.budget,
    )
    print(json.dumps(result))  # noqa: T201  # the probe's one line of output, read by the caller
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
