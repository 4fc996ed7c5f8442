"""torch.compile cache directories: resolved as torch and Triton do, scanned without stalling."""

from __future__ import annotations

import getpass
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpu.compile_cache import (
    cache_dirs,
    inductor_cache_dir,
    scan_caches,
    scan_dir,
    triton_cache_dir,
)
from jupyter_gpu.sampling import Sampler, SamplerOptions
from tests.helpers import wait_for

FILES = 100_000


@pytest.fixture(scope="session")
def big_cache() -> Iterator[Path]:
    """A 100,000-file tree (empty files; /dev/shm when there is one, as it is cheapest)."""
    base = "/dev/shm" if Path("/dev/shm").is_dir() and os.access("/dev/shm", os.W_OK) else None
    root = Path(tempfile.mkdtemp(prefix="jupyter-gpu-cache-", dir=base))
    for d in range(100):
        sub = root / f"{d:02x}"
        sub.mkdir()
        for f in range(FILES // 100):
            os.close(os.open(sub / f"k{f}.py", os.O_CREAT | os.O_WRONLY, 0o600))
    (root / "00" / "k0.py").write_bytes(b"x" * 1234)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_inductor_dir_from_the_environment_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert inductor_cache_dir({"TORCHINDUCTOR_CACHE_DIR": "cache/../ind"}) == str(tmp_path / "ind")


def test_inductor_default_sanitises_the_user_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(getpass, "getuser", lambda: 'dom\\ain/us:er*?"<>|')
    expected = Path(tempfile.gettempdir()) / "torchinductor_dom_ain_us_er______"
    assert inductor_cache_dir({}) == str(expected)


def test_inductor_default_without_a_user_name_uses_the_uid(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_user() -> str:
        raise KeyError("getpwuid(): uid not found: 1234")

    monkeypatch.setattr(getpass, "getuser", no_user)
    assert inductor_cache_dir({}).endswith(f"torchinductor_uid_{os.getuid()}")


def test_triton_dir_resolution() -> None:
    assert triton_cache_dir({"TRITON_CACHE_DIR": "/c/t"}) == "/c/t"
    assert triton_cache_dir({"TRITON_HOME": "/h"}) == "/h/.triton/cache"
    assert triton_cache_dir({}) == str(Path("~").expanduser() / ".triton" / "cache")
    assert [kind for kind, _ in cache_dirs({})] == ["inductor", "triton"]


def test_a_missing_directory_is_size_zero_not_an_error(tmp_path: Path) -> None:
    assert scan_dir(str(tmp_path / "nope")) == (False, 0, 0)
    sample = scan_caches((("inductor", str(tmp_path / "nope")),), clock=5.0)
    assert (sample.size_bytes, sample.file_count, sample.scanned_ts) == (0, 0, 5.0)
    assert sample.dirs[0].exists is False


def test_sizes_counts_symlinks_and_nesting(tmp_path: Path) -> None:
    inductor = tmp_path / "ind"
    (inductor / "triton" / "0").mkdir(parents=True)
    (inductor / "a.py").write_bytes(b"a" * 100)
    (inductor / "triton" / "0" / "k.cubin").write_bytes(b"k" * 50)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big").write_bytes(b"b" * 10_000)
    (inductor / "link").symlink_to(outside)  # not followed
    (inductor / "flink").symlink_to(outside / "big")  # not counted as a file
    triton = inductor / "triton"  # TRITON_CACHE_DIR inside the inductor dir: count once

    sample = scan_caches((("inductor", str(inductor)), ("triton", str(triton))))
    assert [(d.size_bytes, d.file_count) for d in sample.dirs] == [(150, 2), (50, 1)]
    assert (sample.size_bytes, sample.file_count) == (150, 2)


def test_a_scan_stops_early_when_asked(big_cache: Path) -> None:
    stop = threading.Event()
    stop.set()
    exists, _, count = scan_dir(str(big_cache), stop)
    assert exists
    assert count < FILES


def test_a_100k_file_cache_is_counted_and_never_stalls_the_tick(big_cache: Path) -> None:
    assert scan_dir(str(big_cache)) == (True, 1234, FILES)

    sampler = Sampler(
        SamplerOptions(backend="simulated", interval_s=0.1, cache_scan_interval_s=1.0),
        caches=(("inductor", str(big_cache)),),
    )
    sampler.start()
    try:

        def scanned() -> Any:
            entry = sampler.latest()
            return entry if entry is not None and entry.sample.compile_cache.file_count else None

        latest = wait_for(scanned, "the scan never finished", poll_s=0.05)
        # Scans of the big tree keep running; ticks must keep their cadence meanwhile.
        start_len, start = len(sampler.history), time.monotonic()
        gaps = []
        last = latest.sample.ts
        while time.monotonic() - start < 1.5:
            time.sleep(0.02)
            entry = sampler.latest()
            assert entry is not None
            if entry.sample.ts != last:
                gaps.append(entry.sample.ts - last)
                last = entry.sample.ts
        ticks = len(sampler.history) - start_len
    finally:
        sampler.stop()
    cache = latest.sample.compile_cache
    assert (cache.file_count, cache.size_bytes) == (FILES, 1234)
    assert cache.dirs[0].path == str(big_cache)
    # About 15 ticks at 0.1 s; on 2 busy cores fewer, but a tick that waited for the scan would
    # leave a gap as long as the scan itself (seconds here), whatever the load.
    assert ticks >= 5
    scan_s = sampler.cache_scan_duration_s
    assert scan_s is not None
    assert max(gaps) < max(0.5, 0.5 * scan_s), f"a tick waited for the scan: gaps {gaps}"
