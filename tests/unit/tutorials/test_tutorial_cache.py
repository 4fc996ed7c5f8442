"""Notebook 06's cache helpers delete through jupyter_gpu.compile_cache, as the server does."""

from __future__ import annotations

import fcntl
import shutil
from pathlib import Path

import pytest

from jupyter_gpu.compile_cache import scan_dir
from jupyter_gpu.tutorials.cache import bound_cache, cache_bytes, clear_cache
from tests.compile_cache_reference import Reference


@pytest.fixture
def cache(torch_caches: Reference, tmp_path: Path) -> Path:
    """A copy of a cache torch wrote, under a name of the notebook's (``small-disk``)."""
    dst = tmp_path / "small-disk"
    shutil.copytree(torch_caches.configured, dst)
    return dst


def test_bound_cache_trims_to_the_bound_and_leaves_a_cache(cache: Path) -> None:
    before = cache_bytes(cache)
    removed = bound_cache(cache, before // 2)
    assert removed > 0
    assert cache_bytes(cache) == before - removed <= before // 2
    assert bound_cache(cache, before) == 0  # within the bound already


def test_clear_cache_removes_the_folder(cache: Path) -> None:
    size = cache_bytes(cache)
    assert clear_cache(cache) == size
    assert not cache.exists()
    assert clear_cache(cache) == 0  # gone already: nothing to do


def test_a_folder_that_is_not_a_cache_is_refused_whole(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "db").mkdir(parents=True)
    (project / "db" / "data.bin").write_bytes(b"mine")
    with pytest.raises(ValueError, match=r"`db/data\.bin`: torch does not write this"):
        clear_cache(project)
    with pytest.raises(ValueError, match="not a compile cache"):
        bound_cache(project, 0)
    assert (project / "db" / "data.bin").read_bytes() == b"mine"
    with pytest.raises(ValueError, match="top-level or home"):
        clear_cache(Path.home())


def test_nothing_is_removed_while_a_compile_runs(cache: Path) -> None:
    files = scan_dir(str(cache))[2]
    lock = sorted((cache / "locks").iterdir())[0]
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(RuntimeError, match="a compile is running"):
            clear_cache(cache)
        with pytest.raises(RuntimeError, match="a compile is running"):
            bound_cache(cache, 0)
    assert scan_dir(str(cache))[2] == files
