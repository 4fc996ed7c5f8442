"""Clearing a torch.compile cache: only validated caches, never through a symlink; kernels' dirs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jupyter_gpu.sampling.cache_admin import (
    cache_id,
    cache_refusal,
    clear_cache,
    kernel_cache_dirs,
    merge_sources,
    scan_sources,
)


def _inductor(root: Path) -> tuple[Path, int]:
    cache = root / "cachebox" / "torchinductor_me"
    (cache / "fxgraph" / "ab").mkdir(parents=True)
    (cache / "xy").mkdir()
    (cache / "fxgraph" / "ab" / "entry").write_bytes(b"g" * 1000)
    (cache / "xy" / "cxy123.py").write_bytes(b"p" * 234)
    return cache, 1234


def _outside(root: Path) -> Path:
    outside = root / "precious"
    outside.mkdir()
    (outside / "thesis.tex").write_bytes(b"t" * 5000)
    return outside


def test_clear_removes_the_contents_and_reports_bytes(tmp_path: Path) -> None:
    cache, size = _inductor(tmp_path)
    assert cache_refusal("inductor", str(cache)) is None
    result = clear_cache("inductor", str(cache))
    assert (result.freed_bytes, result.files_removed, result.failed) == (size, 2, ())
    assert cache.is_dir()
    assert list(cache.iterdir()) == []


def test_symlinks_inside_are_removed_never_followed(tmp_path: Path) -> None:
    cache, size = _inductor(tmp_path)
    outside = _outside(tmp_path)
    (cache / "zz").symlink_to(outside, target_is_directory=True)  # a top-level link to a dir
    (cache / "fxgraph" / "escape").symlink_to(outside / "thesis.tex")  # a link deep inside
    (cache / "fxgraph" / "dirlink").symlink_to(outside, target_is_directory=True)
    result = clear_cache("inductor", str(cache))
    assert (outside / "thesis.tex").read_bytes() == b"t" * 5000  # untouched
    assert list(cache.iterdir()) == []
    assert result.freed_bytes < size + 5000  # the target's bytes were never counted as freed


def test_a_cache_dir_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    link = tmp_path / "torchinductor_me"
    link.symlink_to(outside, target_is_directory=True)
    reason = cache_refusal("inductor", str(link))
    assert reason is not None
    assert "symlink" in reason
    with pytest.raises(PermissionError, match="symlink"):
        clear_cache("inductor", str(link))
    assert (outside / "thesis.tex").exists()


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda c: (c / "notes.txt").write_text("mine"), "'notes.txt'"),
        (lambda c: (c / "Documents").mkdir(), "'Documents'"),
    ],
)
def test_a_dir_holding_anything_else_is_refused(
    tmp_path: Path, make: object, expected: str
) -> None:
    cache, _ = _inductor(tmp_path)
    make(cache)  # type: ignore[operator]  # the parametrized callable
    reason = cache_refusal("inductor", str(cache))
    assert reason is not None
    assert expected in reason
    with pytest.raises(PermissionError):
        clear_cache("inductor", str(cache))
    assert (cache / "xy" / "cxy123.py").exists()


def test_names_roots_and_missing_dirs(tmp_path: Path) -> None:
    odd = tmp_path / "box" / "mycache"
    (odd / "fxgraph").mkdir(parents=True)
    assert "name" in (cache_refusal("inductor", str(odd)) or "")
    assert cache_refusal("inductor", str(odd), configured=True) is None  # TORCHINDUCTOR_CACHE_DIR
    assert "top-level" in (cache_refusal("inductor", "/tmp", configured=True) or "")
    assert "home" in (cache_refusal("inductor", str(Path.home()), configured=True) or "")
    assert "does not exist" in (cache_refusal("inductor", str(tmp_path / "gone")) or "")


def test_triton_cache_validates_by_its_hash_dirs(tmp_path: Path) -> None:
    cache = tmp_path / "home" / ".triton" / "cache"
    kernel = cache / "SWIUZ4JKU6GBUSCR5ONNBLSWBXFTYPBHURCALH2YIZXVDCPBH6OQ"
    kernel.mkdir(parents=True)
    (kernel / "matmul.cubin").write_bytes(b"c" * 300)
    assert cache_refusal("triton", str(cache)) is None
    assert clear_cache("triton", str(cache)).freed_bytes == 300
    (cache / "x.py").write_text("")
    assert cache_refusal("triton", str(cache)) is not None


def test_scan_sources_gives_ids_and_free_space(tmp_path: Path) -> None:
    cache, size = _inductor(tmp_path)
    sample = scan_sources(
        (
            ("inductor", str(cache), "server", False),
            ("triton", str(tmp_path / "t"), "kernel", True),
        ),
        min_free_pct=0.0,
    )
    d0, d1 = sample.dirs
    assert d0.id == cache_id("inductor", str(cache))
    assert (d0.size_bytes, d0.clearable, d0.refusal) == (size, True, None)
    assert d0.fs_free_bytes is not None
    assert d0.fs_total_bytes is not None
    assert d0.fs_total_bytes >= d0.fs_free_bytes > 0
    assert (d1.exists, d1.clearable, d1.source) == (False, False, "kernel")
    assert not sample.low_space
    assert scan_sources((("inductor", str(cache), "server", False),), min_free_pct=100.0).low_space


def test_kernels_own_cache_dirs_are_found_from_their_environment(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "kernel_cache"),
        "TRITON_CACHE_DIR": str(tmp_path / "kernel_triton"),
    }
    other = {**os.environ, "TMPDIR": str(tmp_path / "ktmp"), "USER": "student"}
    other.pop("TORCHINDUCTOR_CACHE_DIR", None)
    procs = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=e)
        for e in (env, other)
    ]
    try:
        time.sleep(0.2)
        found = kernel_cache_dirs([p.pid for p in procs])
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert ("inductor", str(tmp_path / "kernel_cache"), "kernel", True) in found
    assert ("triton", str(tmp_path / "kernel_triton"), "kernel", True) in found
    assert ("inductor", str(tmp_path / "ktmp" / "torchinductor_student"), "kernel", False) in found
    assert kernel_cache_dirs([2**22 + 12345]) == ()  # no such process: skipped
    merged = merge_sources((("inductor", str(tmp_path / "kernel_cache"), "server", False),), found)
    assert merged[0] == ("inductor", str(tmp_path / "kernel_cache"), "server", True)
