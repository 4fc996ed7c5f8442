"""Notebook 05's exercise 5.1: shard a model with FSDP2 and read what each rank holds.

The student writes a module with two functions, ``shard(model, mesh)`` and
``rank_bytes(model)``. The notebook runs :func:`sharding_report` on two CPU ranks with
``%%torchrun -n 2 --backend gloo``, whatever GPUs the machine has: on each rank it builds the
same model, calls the student's functions and records what the rank really holds, and
:func:`check_fsdp` reads those reports in the notebook. With two ranks each holds half of every
sharded parameter, so a ``rank_bytes`` that counts the whole model fails; in a world of one (one
GPU) it would pass by accident. :func:`check_fsdp_module` (the solution's check) starts the same
ranks itself (:func:`run_sharding`, ``jupyter_gpu.distributed.launch``, the launcher behind
``%%torchrun``), after :func:`report_here` has run the functions in the notebook's own process
as a world of one, so that an unsharded answer fails in a second.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .exercises import Feedback, check

#: Layers of the exercise's model.
DEPTH = 4
_MIB = 2**20


@dataclass(frozen=True)
class RankReport:
    """What one rank held after the student's ``shard``, and what ``rank_bytes`` said."""

    rank: int
    world: int
    #: The model's parameters, unsharded (what every rank holds without FSDP).
    total_bytes: int
    #: What this rank holds of them: each parameter's local shard (``to_local()``).
    held_bytes: int
    #: What the student's ``rank_bytes(model)`` returned.
    reported: object
    params: int
    #: Parameters that are DTensors, sharded over the mesh.
    sharded_params: int
    layers: int
    #: Layers that are FSDP units of their own (``fully_shard`` called on them).
    wrapped_layers: int
    #: Whether ``shard`` returned an ``nn.Module``.
    returned_module: bool
    #: On a GPU: allocated after sharding, and the peak of one forward and backward pass.
    allocated_bytes: int | None = None
    peak_bytes: int | None = None


def exercise_model(width: int) -> Any:
    """``DEPTH`` linear layers of ``width`` x ``width`` in an ``nn.Sequential`` (seeded)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(*(nn.Linear(width, width) for _ in range(DEPTH)))


def _local(tensor: Any) -> Any:
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def sharding_report(module_name: str, device: Any, width: int) -> list[RankReport] | None:
    """On every rank: shard the model with ``module_name``'s functions; rank 0 gets all reports.

    Runs inside a rank whose process group is up (``%%torchrun``'s preamble). The other ranks
    return ``None``.
    """
    import torch.distributed as dist

    report = _report(importlib.import_module(module_name), device, width)
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, report)
    return gathered if dist.get_rank() == 0 else None


def _report(student: ModuleType, device: Any, width: int) -> RankReport:
    """Build the model on ``device``, call the student's functions, and say what this rank holds."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.tensor import DTensor

    on_gpu = device.type == "cuda"
    base = torch.cuda.memory_allocated(device) if on_gpu else 0
    model = exercise_model(width).to(device)
    layers = list(model)
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    returned = student.shard(model, mesh)
    is_module = isinstance(returned, torch.nn.Module)
    model = returned if is_module else model
    params = list(model.parameters())
    allocated = peak = None
    if on_gpu:
        torch.cuda.synchronize(device)
        allocated = torch.cuda.memory_allocated(device) - base
        torch.cuda.reset_peak_memory_stats(device)
    if is_module:  # the sharded model must still train: one forward and backward pass
        model(torch.randn(8, width, device=device)).sum().backward()
    if on_gpu:
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - base
    return RankReport(
        rank=dist.get_rank(),
        world=dist.get_world_size(),
        total_bytes=total,
        held_bytes=sum(_local(p).numel() * p.element_size() for p in params),
        reported=student.rank_bytes(model),
        params=len(params),
        sharded_params=sum(isinstance(p, DTensor) for p in params),
        layers=len(layers),
        wrapped_layers=sum(isinstance(layer, FSDPModule) for layer in layers),
        returned_module=is_module,
        allocated_bytes=allocated,
        peak_bytes=peak,
    )


def report_here(module_name: str, width: int) -> list[RankReport] | None:
    """:func:`sharding_report` in this process: a world of one on the CPU, the file read afresh.

    A quick first look before starting ranks (seconds, not tens of them). ``None`` where this
    process already has a process group (it is left alone).
    """
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return None
    path = Path.cwd() / f"{module_name}.py"
    spec = importlib.util.spec_from_file_location(f"_exercise_{module_name}", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"{path} not found: run the %%writefile cell above first")
    student = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(student)  # the file as it is now, not as first imported
    # A world of one needs no rendezvous file (nothing on disk, nothing to delete afterwards:
    # only jupyter_gpu/compile_cache deletes): an in-memory store is the whole world's.
    store = dist.HashStore()  # type: ignore[attr-defined]  # public (torch docs), not re-exported
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        return [_report(student, torch.device("cpu"), width)]
    finally:
        dist.destroy_process_group()


def run_sharding(module_name: str, *, world: int, backend: str, width: int) -> Any:
    """Start ``world`` ranks (``backend``) that run :func:`sharding_report`; rank 0's reports.

    The ranks start in this process's working folder (the notebook's), where ``%%writefile``
    put the student's module.

    Raises:
        jupyter_gpu.distributed.TorchrunError: a rank failed (the student's code raised).
    """
    from jupyter_gpu.distributed import LaunchSpec, launch

    source = (
        "from jupyter_gpu import torchrun_result\n"
        "from jupyter_gpu.tutorials.checks_05 import sharding_report\n"
        f"torchrun_result(sharding_report({module_name!r}, device, {width}))\n"
    )
    spec = LaunchSpec(nproc_per_node=world, backend=backend, timeout_s=120.0)
    return launch(source, spec, cwd=str(Path.cwd())).result


def check_fsdp(reports: object, *, min_world: int = 2) -> Feedback:
    """Exercise 5.1: every parameter sharded, every layer its own unit, each rank's bytes right.

    ``min_world``: the fewest ranks the reports must come from. In a world of one a shard is
    the whole tensor, so a ``rank_bytes`` that counts the whole model is right there by
    accident: the exercise's check needs two ranks (the notebook runs two CPU ranks whatever
    GPUs the machine has); :func:`check_fsdp_module`'s first look, in this process, passes 1.
    """
    if not isinstance(reports, list) or not reports:
        return check(False, "", "no reports came back from the ranks: run the cell above")
    if len(reports) < min_world:
        return check(
            False,
            "",
            f"{len(reports)} rank(s) reported: a rank's shard is only told from the whole model "
            f"with {min_world} ranks or more. Run the %%torchrun cell above (-n 2 --backend gloo)",
        )
    for r in reports:
        if not r.returned_module:
            return check(False, "", "shard(model, mesh) must return the model it wrapped")
        if r.sharded_params == 0:
            return check(
                False,
                "",
                f"the model is not sharded: each rank holds all {r.total_bytes / _MIB:.2f} MiB of "
                "it, in plain tensors. Call fully_shard(layer, mesh=mesh) on each layer, then "
                "fully_shard(model, mesh=mesh)",
            )
        if r.sharded_params < r.params:
            return check(
                False,
                "",
                f"{r.sharded_params} of {r.params} parameters are sharded: wrap the model itself "
                "too (fully_shard(model, mesh=mesh), after its layers), so that every one is",
            )
        if r.wrapped_layers < r.layers:
            return check(
                False,
                "",
                f"{r.wrapped_layers} of {r.layers} layers are FSDP units of their own: call "
                "fully_shard on each layer, so that a rank gathers one layer's weights at a time "
                "in forward and backward, not the whole model's",
            )
    for r in reports:
        answer = r.reported
        if not isinstance(answer, int | float) or not math.isfinite(answer):
            return check(False, "", f"rank_bytes(model) returned {answer!r}: return a number")
        if abs(answer - r.held_bytes) > 0.01 * r.held_bytes:
            if r.world > 1 and abs(answer - r.total_bytes) <= 0.01 * r.total_bytes:
                hint = (
                    f"rank {r.rank} said {answer:,.0f} bytes: the whole model's size. p.numel() of "
                    "a sharded parameter (a DTensor) counts the global tensor; p.to_local() is "
                    "this rank's shard"
                )
            else:
                hint = f"rank {r.rank} said {answer:,.0f} bytes; it holds {r.held_bytes:,.0f}"
            return check(False, "", hint)
    first = reports[0]
    share = first.held_bytes / first.total_bytes
    text = (
        f"each of {first.world} rank(s) holds its shard: rank 0 {first.held_bytes / _MIB:.2f} MiB "
        f"of the model's {first.total_bytes / _MIB:.2f} MiB ({share:.0%})"
    )
    if first.allocated_bytes is not None and first.peak_bytes is not None:
        text += (
            f"; allocated on its GPU after sharding {first.allocated_bytes / _MIB:.2f} MiB, "
            f"peak of one forward and backward {first.peak_bytes / _MIB:.2f} MiB"
        )
    if first.world == 1:  # only as check_fsdp_module's first look (min_world=1)
        text += " (in a world of one a shard is the whole tensor: two ranks hold half each)"
    return check(True, text, "")


def check_fsdp_module(
    module_name: str, *, width: int, world: int = 2, backend: str = "gloo"
) -> Feedback:
    """Check ``module_name``'s functions: first here (:func:`report_here`), then on the ranks.

    What a world of one shows (a model left unsharded, layers not wrapped) fails at once; an
    answer that passes here runs on ``world`` ranks (:func:`run_sharding`, the launcher behind
    ``%%torchrun``) for the real test: by default two CPU ranks with gloo, on any machine.

    Raises:
        ValueError: ``world`` < 2 (one rank cannot tell a shard from the whole model).
    """
    if world < 2:
        raise ValueError(f"the check needs 2 ranks or more, not {world}")
    here = report_here(module_name, width)
    if here is not None:
        first = check_fsdp(here, min_world=1)
        if not first:
            return first
    return check_fsdp(run_sharding(module_name, world=world, backend=backend, width=width))
