"""What ``%%torchrun`` prints under the ranks' output: its closing line and the ``-o`` notes.

The ranks' own output is streamed by :mod:`jupyter_gpu.distributed` as it comes, and a failure
is the cell's error (``TorchrunError``): these lines are plain text, after them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jupyter_gpu.distributed import LaunchSpec


def show_finished(spec: LaunchSpec, elapsed_s: float) -> None:
    """The cell's closing line: how many ranks ran, where, and for how long."""
    ranks = (
        f"this node's {spec.nproc_per_node} of {spec.world_size} ranks"
        if spec.nnodes > 1
        else f"{spec.world_size} rank{'s' if spec.world_size > 1 else ''}"
    )
    device = "one GPU each" if spec.backend == "nccl" else "CPU"
    print(  # noqa: T201  # the cell's closing line
        f"%%torchrun: {ranks} finished in {elapsed_s:.1f} s ({spec.backend}, {device})"
    )


def show_no_result(name: str, *, nnodes: int) -> None:
    """Why ``-o NAME`` bound nothing: rank 0 ran elsewhere, or never called torchrun_result."""
    if nnodes > 1:
        print(  # noqa: T201  # a note the user needs
            f"-o {name}: rank 0 ran on another node, so its result is there; "
            f"{name} is unchanged here."
        )
    else:
        print(  # noqa: T201  # as above
            f"-o {name}: rank 0 never called torchrun_result(obj), so "
            f"{name} is unchanged (from jupyter_gpu import torchrun_result)."
        )
