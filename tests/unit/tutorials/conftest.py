"""Fixtures of the tutorials' unit tests."""

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch.distributed as dist


@pytest.fixture
def one_rank(tmp_path: Path) -> Iterator[None]:
    """A gloo process group of one rank, destroyed after the test's DDP modules are gone.

    Destroying it while a DDP module still holds it leaves the module's Reducer to destroy it
    later, and gloo's destructor then waits forever on its threads (CI hung there 15 minutes on
    2026-12-05): a test's locals go when it returns, before this teardown, and the collection
    takes a module in a reference cycle first.
    """
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield
    finally:
        gc.collect()
        dist.destroy_process_group()
