"""Clearing deletes what the walk recognised, through descriptors: swaps, owners and mounts.

Each test clears a copy of a cache torch wrote (``torch_caches``) and changes it at the worst
moment: between the check and the deletion, injected where the deletion opens a folder.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jupyter_gpu.compile_cache import CacheRefused, CompileRunning, clear_cache, scan_dir
from jupyter_gpu.compile_cache import clear as clear_module
from jupyter_gpu.compile_cache import recognise as recognise_module  # the module, not a function
from tests.compile_cache_races import SwapOnOpen
from tests.compile_cache_reference import Reference

ROOT = Path(__file__).resolve().parents[3]
UNUSED_UID = 54321
UNSHARE = ["unshare", "--mount", "--propagation", "private"]
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chown, mount)")


@pytest.fixture
def cache(torch_caches: Reference, tmp_path: Path) -> Path:
    """A copy of the configured cache the C++-wrapper compile wrote."""
    dst = tmp_path / "cache"
    shutil.copytree(torch_caches.configured, dst, symlinks=True)
    return dst


def _outside(tmp_path: Path, like: Path) -> tuple[Path, list[Path]]:
    """A folder outside the cache holding files of the same names as ``like``'s (bait)."""
    outside = tmp_path / "precious"
    shutil.copytree(like, outside)
    return outside, sorted(p for p in outside.rglob("*") if p.is_file())


def test_a_symlink_swapped_in_is_never_followed(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside, bait = _outside(tmp_path, cache / "fxgraph")

    def swap() -> None:
        (cache / "fxgraph").rename(tmp_path / "fxgraph-moved")
        (cache / "fxgraph").symlink_to(outside, target_is_directory=True)

    opener = SwapOnOpen("fxgraph", swap)
    monkeypatch.setattr(clear_module, "os", opener)
    result = clear_cache("inductor", str(cache), configured=True)
    assert opener.swapped
    assert all(p.exists() for p in bait), "a file outside the cache was deleted"
    assert result.failed == ("`fxgraph/`: replaced since it was checked: not followed",)
    assert sorted(p.name for p in cache.iterdir()) == ["fxgraph"]  # the rest was cleared


def test_the_cache_itself_swapped_for_a_link_is_never_followed(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside, bait = _outside(tmp_path, cache)  # the same names: a walk through it would pass

    def swap() -> None:
        cache.rename(tmp_path / "checked")
        cache.symlink_to(outside, target_is_directory=True)

    monkeypatch.setattr(recognise_module, "os", SwapOnOpen(str(cache), swap))
    with pytest.raises(CacheRefused, match="cannot be opened as itself"):
        clear_cache("inductor", str(cache), configured=True)
    assert all(p.exists() for p in bait), "a file outside the cache was deleted"


def test_a_folder_swapped_in_is_never_entered(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside, bait = _outside(tmp_path, cache / "fxgraph")

    def swap() -> None:
        (cache / "fxgraph").rename(tmp_path / "fxgraph-moved")
        outside.rename(cache / "fxgraph")

    monkeypatch.setattr(clear_module, "os", SwapOnOpen("fxgraph", swap))
    result = clear_cache("inductor", str(cache), configured=True)
    moved = [cache / "fxgraph" / p.relative_to(outside) for p in bait]
    assert all(p.exists() for p in moved), "a file of the swapped-in folder was deleted"
    assert "`fxgraph/`: replaced since it was checked: not followed" in result.failed


def test_a_file_replaced_after_the_check_is_left(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = sorted(p for p in cache.iterdir() if len(p.name) == 2)[0]
    checked = sorted(code.iterdir())[0]

    def swap() -> None:
        fresh = tmp_path / "fresh"
        fresh.write_text("not the file that was checked")
        fresh.rename(checked)

    monkeypatch.setattr(clear_module, "os", SwapOnOpen(code.name, swap))
    result = clear_cache("inductor", str(cache), configured=True)
    assert checked.read_text() == "not the file that was checked"
    left = f"`{code.name}/{checked.name}`: replaced or changed since it was checked: left alone"
    assert left in result.failed


def test_a_cache_replaced_since_the_scan_is_refused(cache: Path, tmp_path: Path) -> None:
    scanned = (cache.stat().st_dev, cache.stat().st_ino)
    cache.rename(tmp_path / "scanned")
    shutil.copytree(tmp_path / "scanned", cache)  # same names, another directory
    files = scan_dir(str(cache))[2]
    with pytest.raises(CacheRefused, match="replaced since the last scan"):
        clear_cache("inductor", str(cache), configured=True, expect=scanned)
    assert scan_dir(str(cache))[2] == files


@as_root
def test_files_of_another_owner_are_left_and_listed(cache: Path) -> None:
    code = sorted(p for p in cache.iterdir() if len(p.name) == 2)
    theirs = sorted(code[0].iterdir())[0]
    os.chown(theirs, UNUSED_UID, -1)
    their_dir = code[1]
    os.chown(their_dir, UNUSED_UID, -1)
    size = scan_dir(str(cache))[1]
    kept = theirs.stat().st_size + scan_dir(str(their_dir))[1]
    result = clear_cache("inductor", str(cache), configured=True)
    assert theirs.exists()
    assert their_dir.exists()
    not_ours = f"owned by uid {UNUSED_UID}, not this server's user: left"
    assert sorted(result.failed) == sorted(
        [f"`{code[0].name}/{theirs.name}`: {not_ours}", f"`{their_dir.name}/`: {not_ours}"]
    )
    assert result.freed_bytes == size - kept
    assert sorted(p.name for p in cache.iterdir()) == sorted({code[0].name, their_dir.name})


def test_a_running_compile_stops_the_clear(cache: Path) -> None:
    lock = sorted((cache / "locks").iterdir())[0]
    files = scan_dir(str(cache))[2]
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as torch's FileLock does while it compiles
        with pytest.raises(CompileRunning, match=f"holds `locks/{lock.name}`"):
            clear_cache("inductor", str(cache), configured=True)
    assert scan_dir(str(cache))[2] == files


MOUNTED = """
import json, subprocess, sys
from pathlib import Path
from jupyter_gpu.compile_cache import clear_cache
cache, key = Path(sys.argv[1]), sys.argv[2]
mount = cache / "fxgraph" / key[1:3]
mount.mkdir()
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "none", str(mount)], check=True)
(mount / key).mkdir()
(mount / key / ("q" * 51)).write_bytes(b"graph on another filesystem")
result = clear_cache("inductor", str(cache), configured=True)
print(json.dumps({
    "failed": list(result.failed),
    "left": sorted(str(p.relative_to(cache)) for p in cache.rglob("*")),
    "inside": (mount / key / ("q" * 51)).read_bytes().decode(),
}))
"""


@as_root
def test_a_mount_point_inside_is_never_crossed(cache: Path) -> None:
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux) for a private mount namespace")
    taken = {p.name for p in (cache / "fxgraph").iterdir()}
    prefix = next(a + b for a in "mnpq" for b in "mnpq" if a + b not in taken)
    key = f"f{prefix}" + "q" * 49
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(  # a private mount namespace: the tmpfs dies with the child
        [*UNSHARE, sys.executable, "-c", MOUNTED, str(cache), key],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0 and "mount" in done.stderr:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["failed"] == [f"`fxgraph/{prefix}/`: a mount point: not crossed"]
    assert seen["inside"] == "graph on another filesystem"
    mount = f"fxgraph/{prefix}"  # the rest was cleared; the mount is left as it was
    assert seen["left"] == ["fxgraph", mount, f"{mount}/{key}", f"{mount}/{key}/{'q' * 51}"]
