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
    run_sharding,
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
    unsharded = check_fsdp(starter, min_world=1)  # what the first look in the kernel sees
    assert not unsharded
    assert "not sharded" in unsharded.message
    root_only = check_fsdp(_report(world_of_one, "ex_root_only", ROOT_ONLY), min_world=1)
    assert not root_only
    assert "layers are FSDP units" in root_only.message
    solved = _report(world_of_one, "ex_solution", SOLUTION)
    (r,) = solved
    assert (r.sharded_params, r.params, r.wrapped_layers) == (8, 8, 4)
    assert r.held_bytes == r.total_bytes == 4 * (32 * 32 + 32) * 4
    one_rank = check_fsdp(solved)  # the exercise's check: two ranks or more
    assert not one_rank
    assert "with 2 ranks or more" in one_rank.message
    feedback = check_fsdp(solved, min_world=1)  # check_fsdp_module's first look
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
    assert "not sharded" in check_fsdp_module("my_fsdp", width=32).message
    module.write_text(SOLUTION)  # edited, as a student rewrites the %%writefile cell
    again = report_here("my_fsdp", 32)
    assert again is not None
    assert again[0].sharded_params == again[0].params == 8
    assert check_fsdp(again, min_world=1)
    with pytest.raises(ValueError, match="2 ranks or more"):
        check_fsdp_module("my_fsdp", width=32, world=1)


WHOLE_MODEL_BYTES = SOLUTION.replace("p.to_local().numel()", "p.numel()")


@pytest.mark.slow
def test_two_gloo_ranks_catch_a_rank_bytes_that_one_rank_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hole of issue 32: on one GPU (a world of one) a rank_bytes counting p.numel() of each
    DTensor, the whole model, passed. Two real gloo ranks, as the notebook now always runs.
    (The right answer through the same two ranks is notebook 05's solution cell, which every
    smoke run of the notebook requires to pass: tests/integration/test_notebooks.py.)"""
    monkeypatch.chdir(tmp_path)  # the ranks start here and import the modules written here
    (tmp_path / "whole_bytes.py").write_text(WHOLE_MODEL_BYTES)
    alone = report_here("whole_bytes", 32)
    assert alone is not None
    assert check_fsdp(alone, min_world=1)  # a world of one cannot tell: the old check passed
    assert not check_fsdp(alone)  # the exercise's check wants two ranks
    two = run_sharding("whole_bytes", world=2, backend="gloo", width=32)
    assert [r.rank for r in two] == [0, 1]
    assert all(r.held_bytes * 2 == r.total_bytes for r in two)
    wrong = check_fsdp(two)
    assert not wrong
    assert "to_local()" in wrong.message
