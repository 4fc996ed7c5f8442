"""The notebook's DataLoaders as they are set now, and the settings that feed a GPU faster.

When ``%%profile`` measures the DataLoader's ``__next__`` as the largest share of a step, its
hint names the loader and what to change. The loaders are found among the notebook's names: a
``torch.utils.data.DataLoader``, one of its iterators (``iter(loader)``), or either held by a
generator the notebook keeps (``batches = endless(loader)``: the generator's local variables).
torch's range name says which kind ran (``enumerate(DataLoader)#_SingleProcessDataLoaderIter.
__next__`` has no workers), and only loaders of that kind are named.

The advice is PyTorch's own (https://pytorch.org/docs/stable/data.html): ``num_workers`` loads
batches in worker processes, ``pin_memory=True`` puts them in page-locked memory (for
``.to('cuda', non_blocking=True)``), ``persistent_workers=True`` keeps the workers between
epochs. The worker count is the one the tutorials use: the CPUs this kernel's cgroup quota
allows, less one for the training loop, at most 8 (``jupyter_gpu.host.cpus.worker_count``, whose
sentence says which of the two decided it).
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from typing import Any

from jupyter_gpu.host.cpus import CpuBudget, read_cpu_budget, worker_count


@dataclass(frozen=True)
class LoaderSeen:
    """One DataLoader's settings, under the name that reaches it."""

    name: str
    num_workers: int
    pin_memory: bool
    persistent_workers: bool

    def describe(self) -> str:
        return (
            f"{self.name} (num_workers={self.num_workers}, pin_memory={self.pin_memory}, "
            f"persistent_workers={self.persistent_workers})"
        )


def _settings(name: str, obj: Any, loader_type: Any, iter_type: Any) -> LoaderSeen | None:
    if isinstance(obj, loader_type):
        return LoaderSeen(
            name, int(obj.num_workers), bool(obj.pin_memory), bool(obj.persistent_workers)
        )
    if iter_type is not None and isinstance(obj, iter_type):
        # the iterator copies its loader's settings (torch/utils/data/dataloader.py)
        return LoaderSeen(
            name,
            int(getattr(obj, "_num_workers", 0)),
            bool(getattr(obj, "_pin_memory", False)),
            bool(getattr(obj, "_persistent_workers", False)),
        )
    return None


def find_loaders(namespace: dict[str, Any], range_name: str = "") -> list[LoaderSeen]:
    """The DataLoaders the notebook's names reach (one level into generators), by name.

    ``range_name``: torch's ``enumerate(DataLoader)#<iterator>.__next__`` range, which keeps
    only loaders of the kind that ran. Never imports torch: no loader exists without it.
    """
    data = sys.modules.get("torch.utils.data.dataloader")
    if data is None:
        return []
    loader_type = data.DataLoader
    iter_type = getattr(data, "_BaseDataLoaderIter", None)
    found: dict[int, LoaderSeen] = {}
    for name, value in list(namespace.items()):
        if name.startswith("_"):
            continue
        seen = _settings(name, value, loader_type, iter_type)
        if seen is not None:
            found.setdefault(id(value), seen)
            continue
        if inspect.isgenerator(value) and value.gi_frame is not None:
            for local, inner in value.gi_frame.f_locals.items():
                seen = _settings(f"{name} ({local})", inner, loader_type, iter_type)
                if seen is not None:
                    found.setdefault(id(inner), seen)
    loaders = list(found.values())
    if "_SingleProcessDataLoaderIter" in range_name:
        loaders = [seen for seen in loaders if seen.num_workers == 0]
    elif "_MultiProcessingDataLoaderIter" in range_name:
        loaders = [seen for seen in loaders if seen.num_workers > 0]
    return loaders


def loader_fix(seen: LoaderSeen | None, *, cuda: bool, budget: CpuBudget | None = None) -> str:
    """What to change, in PyTorch's words, e.g. ``num_workers=3, pin_memory=True, ...``.

    ``seen``: the loader that ran, ``None`` where none was found (then every setting that helps
    is named). The sentence says where the worker count comes from.
    """
    budget = budget or read_cpu_budget()
    count = worker_count(budget=budget)
    workers = count.workers
    changes = []
    now = seen.num_workers if seen is not None else 0
    if workers > now:
        changes.append(f"num_workers={workers}")
    if cuda and (seen is None or not seen.pin_memory):
        changes.append("pin_memory=True")
    if (workers > 0 or now > 0) and (seen is None or not seen.persistent_workers):
        changes.append("persistent_workers=True")
    quota = count.why()
    if changes:
        return f"DataLoader(..., {', '.join(changes)})" + (
            f" ({quota})" if any(c.startswith("num_workers") for c in changes) else ""
        )
    if workers == 0:
        return (
            f"this kernel may use {budget.describe()}: a worker would take turns with the "
            "training loop; make each batch cheaper (precompute, augment on the GPU)"
        )
    return (
        f"the loader already uses {now} workers ({quota}), pinned and persistent: its batches "
        "cost more CPU than they have; make each batch cheaper (precompute, augment on the GPU)"
    )
