"""The clear's lock check never blocks, a file must still be the one the walk saw, and
``freed_bytes`` counts only what was freed (issue 34, items 4 and 9).

Each test changes a small cache of torch's shapes (``tests/compile_cache_races.py``) at the worst
moment: when the clear opens a name, after the walk checked it.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from jupyter_gpu.compile_cache import CacheRefused, ClearResult, clear_cache, scan_dir, trim_cache
from jupyter_gpu.compile_cache import clear as clear_module
from jupyter_gpu.compile_cache.clear import remove_file_made_here
from tests.compile_cache_races import KEY, OTHER_KEY, SwapOnOpen, small_cache

DEADLINE_S = 10.0  # a clear of this cache takes milliseconds; a blocked one never returns


def _clear_within_deadline(cache: Path, fifo: Path) -> ClearResult | str:
    """Clear ``cache`` in a thread: its result, or the reason it was refused.

    Fails the test if the clear has not returned within ``DEADLINE_S`` (then the FIFO's other
    end is opened, so that the blocked thread can finish).
    """
    outcome: list[ClearResult | str] = []

    def run() -> None:
        try:
            outcome.append(clear_cache("inductor", str(cache)))
        except CacheRefused as err:
            outcome.append(err.reason)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    if thread.is_alive():
        writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # the blocked reader is let go
        os.close(writer)
        thread.join(DEADLINE_S)
        pytest.fail(f"the clear was still waiting on the FIFO after {DEADLINE_S:.0f} s")
    return outcome[0]


@pytest.mark.parametrize("when", ["after the walk", "as the lock is opened"])
def test_a_lock_swapped_for_a_fifo_never_blocks_the_clear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    cache = small_cache(tmp_path)
    lock = cache / "locks" / f"{KEY}.lock"
    files = scan_dir(str(cache))[2]

    def swap() -> None:
        lock.rename(tmp_path / "was-the-lock")
        os.mkfifo(lock)

    # "after the walk": when the lock check opens locks/ (the lock is then seen by name);
    # "as the lock is opened": between that look and the open (O_NONBLOCK, then fstat).
    opened = "locks" if when == "after the walk" else lock.name
    monkeypatch.setattr(clear_module, "os", SwapOnOpen(opened, swap))
    outcome = _clear_within_deadline(cache, lock)
    assert outcome == (
        f"`locks/{lock.name}` was replaced or changed since it was checked (a compile may have "
        "started): try again"
    )
    assert scan_dir(str(cache))[2] == files - 1  # nothing deleted (the FIFO is no file)


def _until_the_clock_passes(path: Path, scratch: Path) -> None:
    """Wait until a file made now gets a later ctime than ``path`` has (inode times are coarse:
    one clock tick, a few ms, can hold both)."""
    deadline = time.monotonic() + DEADLINE_S
    probe = scratch / "clock-probe"
    while time.monotonic() < deadline:
        probe.write_bytes(b"")
        if probe.stat().st_ctime_ns > path.stat().st_ctime_ns:
            return
    pytest.fail("the filesystem's clock did not move")


def test_a_file_with_a_reused_inode_number_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = small_cache(tmp_path)
    checked = cache / "aa" / f"{KEY}.py"
    ino = checked.stat().st_ino
    aside = tmp_path / "aside"
    aside.mkdir()
    _until_the_clock_passes(checked, aside)

    def replace_it() -> None:  # another file under the name, until one gets the freed inode
        checked.unlink()
        for attempt in range(50):
            checked.write_bytes(b"another file, made after the check")
            if checked.stat().st_ino == ino:
                return
            checked.rename(aside / str(attempt))  # kept, so that its inode is not freed again
        # Another process on this filesystem took the inode first: the test is skipped below.
        checked.write_bytes(b"another file, made after the check")

    monkeypatch.setattr(clear_module, "os", SwapOnOpen("aa", replace_it))
    result = clear_cache("inductor", str(cache))
    if checked.stat().st_ino != ino:
        pytest.skip("the freed inode number went to no file made here (tmpfs, or a busy disk)")
    assert checked.read_bytes() == b"another file, made after the check"
    assert result.failed == (
        f"`aa/{KEY}.py`: replaced or changed since it was checked: left alone",
    )


def test_a_file_written_since_the_walk_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = small_cache(tmp_path)
    checked = cache / "bb" / f"{OTHER_KEY}.py"
    before = checked.stat()
    _until_the_clock_passes(checked, tmp_path)

    def write() -> None:
        checked.write_bytes(b"written after the check")

    monkeypatch.setattr(clear_module, "os", SwapOnOpen("bb", write))
    result = clear_cache("inductor", str(cache))
    assert (checked.stat().st_dev, checked.stat().st_ino) == (before.st_dev, before.st_ino)
    assert checked.read_bytes() == b"written after the check"
    assert result.failed == (
        f"`bb/{OTHER_KEY}.py`: replaced or changed since it was checked: left alone",
    )


def test_freed_bytes_count_a_file_only_when_its_last_link_goes(tmp_path: Path) -> None:
    cache = small_cache(tmp_path)
    os.link(cache / "aa" / f"{KEY}.py", tmp_path / "kept-elsewhere.py")  # 1,000 bytes
    os.link(cache / "aa" / f"{KEY}.so", cache / "bb" / f"{KEY}.so")  # 500, twice in the cache
    result = clear_cache("inductor", str(cache))
    assert result.failed == ()
    assert result.files_removed == 5  # aa's two, bb's two, the lock
    assert result.freed_bytes == 500 + 2000  # not the .py still linked outside; the .so once
    assert (tmp_path / "kept-elsewhere.py").read_bytes() == b"p" * 1000


def test_a_file_made_here_is_removed_only_while_it_is_that_file(tmp_path: Path) -> None:
    made = tmp_path / "made.partial"
    made.write_bytes(b"x" * 10)
    st = made.stat()
    identity = (st.st_dev, st.st_ino, st.st_ctime_ns)
    folder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        made.rename(tmp_path / "moved")
        (tmp_path / "made.partial").write_bytes(b"someone else's")
        kept = remove_file_made_here(folder, "made.partial", identity)
        assert kept.failed == (
            "`made.partial`: replaced or changed since it was checked: left alone",
        )
        assert (tmp_path / "made.partial").read_bytes() == b"someone else's"
        (tmp_path / "made.partial").unlink()
        (tmp_path / "moved").rename(tmp_path / "made.partial")
        st = (tmp_path / "made.partial").stat()  # a rename changes the ctime
        gone = remove_file_made_here(folder, "made.partial", (st.st_dev, st.st_ino, st.st_ctime_ns))
        assert (gone.freed_bytes, gone.files_removed, gone.failed) == (10, 1, ())
        assert not (tmp_path / "made.partial").exists()
    finally:
        os.close(folder)


def test_a_trim_counts_the_caches_size_not_what_was_freed(tmp_path: Path) -> None:
    cache = small_cache(tmp_path)  # aa/ 1,500 bytes (oldest), bb/ 2,000
    for f in (cache / "aa").iterdir():
        os.utime(f, (1e9, 1e9))
    os.link(cache / "aa" / f"{KEY}.py", tmp_path / "kept-elsewhere.py")
    result = trim_cache("inductor", str(cache), 2000)
    assert not (cache / "aa").exists()  # the oldest entry went: the cache is 2,000 bytes now
    assert (cache / "bb" / f"{OTHER_KEY}.py").exists()  # and the trim stopped there
    assert result.freed_bytes == 500  # the .py still has its other name
    assert scan_dir(str(cache))[1] == 2000
