"""Notebook 05's exercise: the FSDP check rejects the known wrong answers, accepts the solution."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from jupyter_gpu.tutorials.checks_05 import (
    RankReport,
    check_fsdp,
    check_fsdp_module,
    report_here,
    sharding_report,
)

STARTER = """
def shard(model, mesh):
    return model


def rank_bytes(model):
    return sum(p.numel() * p.element_size() for p in model.parameters())
"""
SOLUTION = """
from torch.distributed.fsdp import fully_shard


def shard(model, mesh):
    for layer in model:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def rank_bytes(model):
    return sum(p.to_local().numel() * p.element_size() for p in model.parameters())
"""
ROOT_ONLY = """
from torch.distributed.fsdp import fully_shard


def shard(model, mesh):
    fully_shard(model, mesh=mesh)
    return model


def rank_bytes(model):
    return sum(p.to_local().numel() * p.element_size() for p in model.parameters())
"""


@pytest.fixture
def world_of_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A real gloo process group of one rank in this process, and a folder on the import path."""
    monkeypatch.syspath_prepend(str(tmp_path))
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        yield tmp_path
    finally:
        dist.destroy_process_group()


def _report(folder: Path, name: str, source: str) -> list[RankReport]:
    (folder / f"{name}.py").write_text(source)
    reports = sharding_report(name, torch.device("cpu"), 32)
    assert reports is not None
    return reports


def test_real_sharding_in_a_world_of_one(world_of_one: Path) -> None:
    starter = _report(world_of_one, "ex_starter", STARTER)
    assert starter[0].sharded_params == 0
    unsharded = check_fsdp(starter)
    assert not unsharded
    assert "not sharded" in unsharded.message
    root_only = check_fsdp(_report(world_of_one, "ex_root_only", ROOT_ONLY))
    assert not root_only
    assert "layers are FSDP units" in root_only.message
    solved = _report(world_of_one, "ex_solution", SOLUTION)
    (r,) = solved
    assert (r.sharded_params, r.params, r.wrapped_layers) == (8, 8, 4)
    assert r.held_bytes == r.total_bytes == 4 * (32 * 32 + 32) * 4
    feedback = check_fsdp(solved)
    assert feedback
    assert "world of one" in feedback.message


def _two_ranks(reported: int | None = None) -> list[RankReport]:
    # What two ranks report for the solution (a 4-layer model of 1 MiB, half on each rank).
    total = 2**20
    base = RankReport(
        rank=0,
        world=2,
        total_bytes=total,
        held_bytes=total // 2,
        reported=total // 2 if reported is None else reported,
        params=8,
        sharded_params=8,
        layers=4,
        wrapped_layers=4,
        returned_module=True,
    )
    return [base, dataclasses.replace(base, rank=1)]


def test_two_ranks_reject_the_unsharded_size_and_accept_each_ranks_shard() -> None:
    assert check_fsdp(_two_ranks())
    whole = check_fsdp(_two_ranks(reported=2**20))  # p.numel() of a DTensor: the global size
    assert not whole
    assert "to_local()" in whole.message
    off = check_fsdp(_two_ranks(reported=1000))
    assert not off
    assert "it holds" in off.message
    first, second = _two_ranks()
    not_a_number = check_fsdp([first, dataclasses.replace(second, reported="half")])
    assert "return a number" in not_a_number.message
    assert not check_fsdp([dataclasses.replace(_two_ranks()[0], returned_module=False)])
    assert not check_fsdp(None)
    assert not check_fsdp([])


def test_the_first_look_in_this_process_reads_the_file_as_it_is_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    module = tmp_path / "my_fsdp.py"
    module.write_text(STARTER)
    first = report_here("my_fsdp", 32)
    assert first is not None
    assert first[0].sharded_params == 0
    assert not dist.is_initialized()  # the kernel is left without a process group
    # An unsharded answer fails here, before any rank starts (no launch: this test has none).
    assert "not sharded" in check_fsdp_module("my_fsdp", world=2, backend="gloo", width=32).message
    module.write_text(SOLUTION)  # edited, as a student rewrites the %%writefile cell
    again = report_here("my_fsdp", 32)
    assert again is not None
    assert again[0].sharded_params == again[0].params == 8
    assert check_fsdp(again)
