"""What notebook 05's no_sync count rests on: DDP's first backward is not like the others.

DDP gives every gradient one bucket for its first backward and cuts the buckets in the order the
gradients came at the next forward (``compute_bucket_size_limits`` and ``_rebuild_buckets`` in
``torch/nn/parallel/distributed.py``). Counting a step's all-reduces from the first backward on
mixed the two (one H100, 2026-12-05: 79 all-reduces, not 4 x 26); 05's ``accumulate`` now counts
from the second iteration on, as this test does.
"""

from contextlib import nullcontext

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel

MICRO = 4


def _counted_ddp() -> tuple[DistributedDataParallel, dict[str, int]]:
    torch.manual_seed(0)
    # 4 x 16 MiB of weights: more than one of DDP's 25 MiB buckets once they are rebuilt
    model = DistributedDataParallel(nn.Sequential(*(nn.Linear(2048, 2048) for _ in range(4))))
    seen = {"calls": 0}

    def hook(state: object, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        seen["calls"] += 1
        return allreduce_hook(None, bucket)  # type: ignore[arg-type]

    model.register_comm_hook(None, hook)
    return model, seen


def _backwards(model: DistributedDataParallel, sync_each: bool) -> None:
    x = torch.randn(8, 2048)
    for i in range(MICRO):
        skip = not sync_each and i < MICRO - 1
        with model.no_sync() if skip else nullcontext():
            model(x).sum().backward()
    model.zero_grad(set_to_none=True)


@pytest.mark.usefixtures("one_rank")
def test_the_first_backward_has_one_bucket_and_later_ones_more() -> None:
    model, seen = _counted_ddp()
    model(torch.randn(8, 2048)).sum().backward()
    assert seen["calls"] == 1
    model.zero_grad(set_to_none=True)
    model(torch.randn(8, 2048)).sum().backward()
    assert seen["calls"] > 2


@pytest.mark.usefixtures("one_rank")
def test_counted_from_the_second_iteration_no_sync_all_reduces_once_a_step() -> None:
    model, seen = _counted_ddp()
    _backwards(model, sync_each=True)  # the first iteration, uncounted (05's accumulate)
    counts = {}
    for sync_each in (True, False):
        seen["calls"] = 0
        _backwards(model, sync_each)
        counts[sync_each] = seen["calls"]
    assert counts[True] == MICRO * counts[False]
    assert counts[False] > 1
