"""Does a CUDA graph capture that runs out of memory leave its pool reserved in this torch?

Notebook 07 on one H100 (2026-12-05): CUDA graphs ran out of memory while recording, and later
the notebook's kernel still held 16.89 GiB that ``torch.cuda.empty_cache()`` did not give back.
pytorch/pytorch#190348 describes such a leak (``CUDAGraph::reset()`` released a graph's private
pool only after a capture that ended well) and fixes it; which torch builds carry the fix, this
script finds out on the machine it runs on, in seconds:

1. fill the GPU with one tensor until ``--room`` GiB are left;
2. capture a graph that allocates ``--first`` GiB (it fits) and then twice the room (it does
   not), so the capture fails part-way;
3. drop the graph and the filler, collect, ``empty_cache()``, and read what torch still reserves.

With the fix, ``reserved`` comes back to where it started; without it, the failed capture's pool
(at least the ``--first`` GiB it allocated) stays reserved until the process ends. (07 records
through ``torch.compile(mode="reduce-overhead")``, whose CUDA graph trees capture with the same
``torch.cuda.graph``; this script captures directly, so that the failure is the capture's and
not an eager warm-up's.)

    python benchmarks/cudagraph_oom_leak.py [--room 4] [--first 1] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from pathlib import Path
from typing import Any

import torch

GiB = 2**30


def _settle() -> int:
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return int(torch.cuda.memory_reserved())


def _fill_until(room_bytes: int) -> torch.Tensor:
    """One tensor that leaves about ``room_bytes`` of the device free."""
    free, _total = torch.cuda.mem_get_info()
    return torch.empty(max(0, int(free) - room_bytes), dtype=torch.uint8, device="cuda")


def failed_capture(room_bytes: int, first_bytes: int) -> None:
    """A torch.cuda.graph capture that allocates ``first_bytes``, then more than is free."""
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            kept = torch.empty(first_bytes, dtype=torch.uint8, device="cuda")
            too_much = torch.empty(2 * room_bytes, dtype=torch.uint8, device="cuda")
            del kept, too_much
    finally:
        del graph


def measure(room_bytes: int, first_bytes: int) -> dict[str, Any]:
    """What torch still reserves after a failed capture and its clean-up, against before it."""
    before = _settle()
    filler = _fill_until(room_bytes)
    error = ""
    try:
        failed_capture(room_bytes, first_bytes)
    except torch.OutOfMemoryError as err:
        error = str(err).splitlines()[0][:160]
    except RuntimeError as err:  # a capture that fails can raise a plain RuntimeError too
        error = f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
    del filler
    after = _settle()
    return {
        "error": error or "none: the capture did not fail (raise --first or lower --room)",
        "reserved_before_bytes": before,
        "reserved_after_bytes": after,
        "allocated_after_bytes": int(torch.cuda.memory_allocated()),
        "kept_bytes": after - before,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--room", type=float, default=4.0, help="GiB left free by the filler")
    parser.add_argument("--first", type=float, default=1.0, help="GiB the capture gets first")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs CUDA: run it on the GPU machine", file=sys.stderr)
        return 2
    row = measure(int(args.room * GiB), int(args.first * GiB))
    before, after = row["reserved_before_bytes"] / GiB, row["reserved_after_bytes"] / GiB
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(
        f"torch.cuda.graph: failed with {row['error']}; reserved {before:.2f} -> {after:.2f} GiB "
        f"after the clean-up ({row['allocated_after_bytes'] / GiB:.2f} GiB allocated): "
        f"{row['kept_bytes'] / GiB:.2f} GiB kept"
    )
    if args.json:
        args.json.write_text(json.dumps({"torch": torch.__version__, **row}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
