"""Notebook 03's fragmentation pattern, here or in a fresh process with another allocator setting.

:func:`fragment` allocates many 6 MiB tensors, frees every other one, asks for one tensor as large
as all the freed ones together, and calls ``torch.cuda.empty_cache()``. With torch's default
allocator the 6 MiB pieces share 20 MiB segments, so the freed pieces are holes in segments that
still hold a live piece: *reserved* but unusable for the large request, and ``empty_cache()``
cannot give them back.

``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` changes how the allocator maps memory, and
is read once, when CUDA starts in a process: a notebook's kernel cannot switch it for itself.
:func:`in_fresh_process` runs the same pattern in a new Python process with the setting on or off
(``python -m jupyter_gpu.tutorials.fragmentation`` is that process) and returns its reading.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import Any

ALLOC_CONF_ENV = "PYTORCH_CUDA_ALLOC_CONF"
NEW_ALLOC_CONF_ENV = "PYTORCH_ALLOC_CONF"  # the device-neutral name newer torch also reads
PIECE_BYTES = 6 * 2**20


@dataclass(frozen=True)
class FragmentationReading:
    """The allocator after the pattern, above what it held before it, in bytes.

    Attributes:
        allocated_bytes: in live tensors (the kept pieces and the large tensor).
        reserved_bytes: what the allocator holds from CUDA.
        inactive_split_bytes: free pieces inside segments that also hold live ones.
        expandable: whether the allocator's segments were expandable (``None``: this torch's
            snapshot does not say).
    """

    allocated_bytes: int
    reserved_bytes: int
    inactive_split_bytes: int
    expandable: bool | None

    @property
    def unusable_bytes(self) -> int:
        """Reserved but not allocated, after ``empty_cache()``: the waste."""
        return self.reserved_bytes - self.allocated_bytes


def fragment(pieces: int) -> tuple[FragmentationReading, list[Any]]:
    """Run the pattern on the current CUDA device; returns the reading and the live tensors.

    The caller holds the tensors as long as it wants to look at the allocator (``%memsummary``),
    then drops them.
    """
    import torch

    gc.collect()
    torch.cuda.empty_cache()
    allocated, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    kept = [torch.empty(PIECE_BYTES, dtype=torch.uint8, device="cuda") for _ in range(pieces)]
    del kept[::2]  # free every other piece: a hole beside a live piece in every segment
    big = torch.empty(len(kept) * PIECE_BYTES, dtype=torch.uint8, device="cuda")  # as much
    torch.cuda.empty_cache()
    segments = torch.cuda.memory_snapshot()  # type: ignore[no-untyped-call]
    flags = [s["is_expandable"] for s in segments if "is_expandable" in s]
    reading = FragmentationReading(
        allocated_bytes=torch.cuda.memory_allocated() - allocated,
        reserved_bytes=torch.cuda.memory_reserved() - reserved,
        inactive_split_bytes=int(
            torch.cuda.memory_stats().get("inactive_split_bytes.all.current", 0)
        ),
        expandable=any(flags) if flags else None,
    )
    return reading, [*kept, big]


def alloc_conf(existing: str | None, expandable: bool) -> str:
    """``existing`` allocator options with ``expandable_segments`` set to ``expandable``."""
    options = [o for o in (existing or "").split(",") if o.strip()]
    kept = [o for o in options if o.split(":", 1)[0].strip() != "expandable_segments"]
    return ",".join([*kept, f"expandable_segments:{expandable}"])


def in_fresh_process(
    expandable: bool, pieces: int, fraction: float | None = None, timeout_s: float = 300
) -> FragmentationReading:
    """The pattern in a new Python process whose allocator has ``expandable_segments`` on/off.

    The child keeps this process's other allocator options and, with ``fraction``, runs under
    the same ``set_per_process_memory_fraction`` cap.

    Raises:
        RuntimeError: the child failed (its last lines of output are the message).
    """
    env = dict(os.environ)
    existing = env.pop(NEW_ALLOC_CONF_ENV, None) or env.get(ALLOC_CONF_ENV)
    env[ALLOC_CONF_ENV] = alloc_conf(existing, expandable)
    command = [sys.executable, "-m", __name__, "--pieces", str(pieces)]
    if fraction is not None:
        command += ["--fraction", repr(fraction)]
    done = subprocess.run(  # noqa: S603  # this interpreter running this module
        command, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
        raise RuntimeError(f"the fresh process failed ({done.returncode}): {tail}")
    return FragmentationReading(**json.loads(lines[-1]))


def main(argv: list[str] | None = None) -> None:
    """Run the pattern in this (fresh) process and print its reading as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pieces", type=int, default=300)
    parser.add_argument("--fraction", type=float, help="torch's per-process memory cap")
    args = parser.parse_args(argv)
    import torch

    if args.fraction is not None:
        torch.cuda.set_per_process_memory_fraction(args.fraction)
    reading, held = fragment(args.pieces)
    del held
    print(json.dumps(asdict(reading)))  # noqa: T201  # the parent reads this line


if __name__ == "__main__":
    main()
