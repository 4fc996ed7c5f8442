"""%%profile names the notebook's DataLoaders as they are set, and what to change."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from jupyter_gpu.host.cpus import CpuBudget
from jupyter_gpu.magics.profile.loaders import LoaderSeen, find_loaders, loader_fix

DATA = TensorDataset(torch.arange(8.0))
SINGLE = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
MULTI = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"


def endless(loader: Any) -> Iterator[Any]:
    while True:
        yield from loader


def test_loaders_are_found_by_name_in_generators_and_as_iterators() -> None:
    plain = DataLoader(DATA, batch_size=2)
    pinned = DataLoader(DATA, batch_size=2, num_workers=2, pin_memory=True)
    batches = endless(DataLoader(DATA, batch_size=4))
    next(batches)  # started: its frame holds the loader
    namespace = {"plain": plain, "it": iter(plain), "batches": batches, "w": pinned, "_x": plain}
    found = {seen.name: seen for seen in find_loaders(namespace)}
    assert set(found) == {"plain", "it", "batches (loader)", "w"}
    assert found["w"] == LoaderSeen("w", 2, True, False)
    # torch's range says which kind ran: only loaders of that kind are named
    assert {s.name for s in find_loaders(namespace, SINGLE)} == {"plain", "it", "batches (loader)"}
    assert [s.name for s in find_loaders(namespace, MULTI)] == ["w"]
    assert find_loaders({"n": 3}) == []


def test_the_fix_counts_workers_from_the_cpu_quota() -> None:
    quota = CpuBudget(affinity=64, quota=4.0)  # 4 CPUs of 64 cores: 3 workers
    none = LoaderSeen("loader", 0, False, False)
    fix = loader_fix(none, cuda=True, budget=quota)
    assert fix.startswith(
        "DataLoader(..., num_workers=3, pin_memory=True, persistent_workers=True)"
    )
    assert "3 = the 4 CPUs (cgroup quota 4 of 64 cores) this kernel may use, less one" in fix
    assert "pin_memory" not in loader_fix(none, cuda=False, budget=quota)  # no GPU to copy to
    done = LoaderSeen("loader", 3, True, True)
    assert "already uses 3 workers" in loader_fix(done, cuda=True, budget=quota)
    one_cpu = CpuBudget(affinity=1, quota=None)
    assert "a worker would take turns with the training loop" in loader_fix(
        none, cuda=False, budget=one_cpu
    )
    assert loader_fix(None, cuda=True, budget=quota).startswith(
        "DataLoader(..., num_workers=3, pin_memory=True, persistent_workers=True)"
    )


def test_the_fix_names_the_cap_when_the_cap_decided_the_worker_count() -> None:
    # On the H200 (16 CPUs) the count is 8, the cap: "8 = the 16 CPUs less one" was false.
    none = LoaderSeen("loader", 0, False, False)
    capped = loader_fix(none, cuda=True, budget=CpuBudget(affinity=16, quota=None))
    assert "num_workers=8" in capped
    assert (
        "8, the cap (the 16 CPUs this kernel may use, less one for the training process, would "
        "allow 15)" in capped
    )
    assert "8 = " not in capped
    # Nine CPUs: the quota less one is 8 itself, the cap decided nothing.
    exact = loader_fix(none, cuda=True, budget=CpuBudget(affinity=9, quota=None))
    assert "8 = the 9 CPUs this kernel may use, less one for the training process" in exact
    assert "the cap" not in exact
