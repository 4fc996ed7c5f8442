"""Worker counts and Inductor's compile threads follow the cgroup's CPU quota (files as written)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jupyter_gpu.host.cgroup import CgroupReader
from jupyter_gpu.tutorials.cpus import (
    COMPILE_THREADS_ENV,
    CpuBudget,
    dataloader_workers,
    limit_compile_threads,
    read_cpu_budget,
    usable_cpus,
)


def cgroup_v2(tmp_path: Path, cpu_max: str) -> CgroupReader:
    """A container's cgroup v2 tree whose ``cpu.max`` says ``cpu_max``."""
    root, proc = tmp_path / "cgroup", tmp_path / "proc_cgroup"
    (root / "ctr").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu memory\n")
    (root / "ctr" / "cpu.max").write_text(cpu_max + "\n")
    proc.write_text("0::/ctr\n")
    return CgroupReader(root, proc)


@pytest.mark.parametrize(
    ("cpu_max", "usable", "workers"),
    [
        ("200000 100000", 2, 1),  # docker run --cpus 2 on a 64-core host
        ("250000 100000", 2, 1),  # 2.5 CPUs: two can be kept busy
        ("100000 100000", 1, 0),  # one CPU: a worker would only take turns with training
        ("1600000 100000", 16, 8),  # 16 CPUs: the caller's most (8)
        ("max 100000", 64, 8),  # no quota: the affinity mask
    ],
)
def test_workers_follow_the_quota_not_the_host(
    tmp_path: Path, cpu_max: str, usable: int, workers: int
) -> None:
    budget = read_cpu_budget(cgroup_v2(tmp_path, cpu_max), affinity=64)
    assert budget.usable == usable
    assert dataloader_workers(budget=budget) == workers
    assert dataloader_workers(most=2, budget=budget) == min(2, workers)


def test_usable_cpus_is_the_quota_rounded_down(tmp_path: Path) -> None:
    assert usable_cpus(cgroup_v2(tmp_path, "150000 100000")) == 1


def test_the_budget_says_where_the_figure_comes_from(tmp_path: Path) -> None:
    budget = read_cpu_budget(cgroup_v2(tmp_path, "250000 100000"), affinity=64)
    assert budget.describe() == "2 CPUs (cgroup quota 2.5 of 64 cores)"
    assert CpuBudget(affinity=4, quota=None).describe() == "4 CPUs"


def test_compile_threads_follow_the_quota_and_a_users_setting_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    budget = read_cpu_budget(cgroup_v2(tmp_path, "300000 100000"), affinity=64)
    env: dict[str, str] = {}
    monkeypatch.delitem(sys.modules, "torch._inductor.config", raising=False)
    assert limit_compile_threads(budget, env) == 3
    assert env[COMPILE_THREADS_ENV] == "3", "child processes (notebook 06's) inherit it"
    mine = {COMPILE_THREADS_ENV: "1"}
    assert limit_compile_threads(budget, mine) == 1
    assert mine[COMPILE_THREADS_ENV] == "1"
    wide = CpuBudget(affinity=128, quota=None)
    assert limit_compile_threads(wide, {}) == 32, "Inductor's own cap"


def test_an_imported_inductor_config_is_set_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inductor reads the variable once, at import: a kernel that compiled already needs both."""
    import torch._inductor.config as inductor_config

    monkeypatch.setattr(inductor_config, "compile_threads", 64)
    budget = read_cpu_budget(cgroup_v2(tmp_path, "200000 100000"), affinity=64)
    assert limit_compile_threads(budget, {}) == 2
    assert inductor_config.compile_threads == 2
