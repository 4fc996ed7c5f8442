"""Which caches there are (the server's and kernels'), their ids, what a scan says of each."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpu.compile_cache import (
    cache_dirs,
    cache_id,
    clear_cache,
    inductor_cache_dir,
    kernel_cache_dirs,
    merge_sources,
    refusal,
    scan_sources,
    server_cache_dirs,
    triton_cache_dir,
)
from jupyter_gpu.compile_cache.locate import _resolved
from tests.compile_cache_races import small_cache
from tests.helpers import wait_until_execd


def _small_cache(root: Path) -> tuple[Path, int]:
    """A cache of torch's shapes (the shapes themselves are checked against real compiles)."""
    cache = root / "cachebox" / "torchinductor_me"
    key = "c" + "a" * 51
    (cache / "aa").mkdir(parents=True)
    (cache / "locks").mkdir()
    (cache / "aa" / f"{key}.py").write_bytes(b"p" * 1000)
    (cache / "locks" / f"{key}.lock").write_bytes(b"")
    return cache, 1000


@contextlib.contextmanager
def running_kernel(env: Mapping[Any, Any], cwd: Path | None = None) -> Iterator[int]:
    """A stand-in kernel process with ``env`` and ``cwd``: its pid, once it runs its own program.

    Before its ``exec`` a child's environment is its parent's: the full suite once read the
    test's own there, under load.
    """
    kernel = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        env=env,
        cwd=cwd,
        stdin=subprocess.PIPE,
    )
    try:
        wait_until_execd([kernel])
        yield kernel.pid
    finally:
        kernel.communicate(b"")


def test_location_checks_come_first(tmp_path: Path) -> None:
    odd = tmp_path / "box" / "mycache"
    (odd / "fxgraph").mkdir(parents=True)
    assert "name" in (refusal("inductor", str(odd))[0] or "")
    assert refusal("inductor", str(odd), configured=True) == (
        None,
        (odd.stat().st_dev, odd.stat().st_ino),
    )
    assert "top-level" in (refusal("inductor", "/tmp", configured=True)[0] or "")
    assert "home" in (refusal("inductor", str(Path.home()), configured=True)[0] or "")
    assert "does not exist" in (refusal("inductor", str(tmp_path / "gone"))[0] or "")
    link = tmp_path / "torchinductor_link"
    link.symlink_to(odd, target_is_directory=True)
    assert "symlink" in (refusal("inductor", str(link))[0] or "")


def test_scan_sources_gives_ids_refusals_identity_and_free_space(tmp_path: Path) -> None:
    cache, size = _small_cache(tmp_path)
    other = tmp_path / "other" / "torchinductor_you"
    (other / "db").mkdir(parents=True)
    (other / "db" / "data.bin").write_bytes(b"d")
    sample = scan_sources(
        (
            ("inductor", str(cache), "server", False),
            ("triton", str(tmp_path / "t"), "kernel", True),
            ("inductor", str(other), "kernel", False),
        ),
        min_free_pct=0.0,
    )
    d0, d1, d2 = sample.dirs
    assert d0.id == cache_id("inductor", str(cache))
    assert (d0.size_bytes, d0.clearable, d0.refusal) == (size, True, None)
    assert d0.identity == (cache.stat().st_dev, cache.stat().st_ino)
    assert "identity" not in d0.to_dict()  # internal: the clear route checks it
    assert d0.fs_free_bytes is not None
    assert d0.fs_total_bytes is not None
    assert d0.fs_total_bytes >= d0.fs_free_bytes > 0
    assert (d1.exists, d1.clearable, d1.source, d1.identity) == (False, False, "kernel", None)
    assert (d2.clearable, d2.refusal, d2.identity) == (
        False,
        "`db/data.bin`: torch does not write this",
        None,
    )
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
        wait_until_execd(procs)  # each reads its own environment from then on
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


@pytest.mark.parametrize("kind", ["inductor", "triton"])
def test_an_empty_cache_is_clearable(tmp_path: Path, kind: str) -> None:
    empty = tmp_path / "box" / "empty"
    empty.mkdir(parents=True)
    assert refusal(kind, str(empty), configured=True)[0] is None  # type: ignore[arg-type]


def test_a_configured_inductor_cache_keeps_torchs_default_in_view(tmp_path: Path) -> None:
    # torch 2.8+ writes its precompiled headers (155 MB for one header with torch 2.13) into the
    # default directory whatever TORCHINDUCTOR_CACHE_DIR says: a configured cache alone would
    # hide them (tests/compile_cache_reference.py: configured_headers).
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "project"), "USER": "student"}
    default = inductor_cache_dir({})
    assert server_cache_dirs(env) == (
        ("inductor", str(tmp_path / "project"), "server", True),
        ("inductor", default, "server", False),
        ("triton", triton_cache_dir(env), "server", False),
    )
    # A kernel's default follows its own TMPDIR and user, as torch resolves it there.
    kernel = {**env, "TMPDIR": str(tmp_path / "ktmp")}
    resolved = [path for kind, path in _resolved(kernel) if kind == "inductor"]
    assert resolved == [str(tmp_path / "project"), str(tmp_path / "ktmp" / "torchinductor_student")]
    # Set to the default itself, the variable adds no second row.
    assert [k for k, _ in cache_dirs({"TORCHINDUCTOR_CACHE_DIR": default})] == [
        "inductor",
        "triton",
    ]


def test_a_path_that_is_not_utf8_refuses_only_its_own_cache(tmp_path: Path) -> None:
    good = small_cache(tmp_path / "good")
    bad = os.fsencode(tmp_path) + b"/caf\xe9/torchinductor_me"  # Latin-1, not UTF-8
    Path(os.fsdecode(bad)).mkdir(parents=True)
    env = {b"PATH": os.environb[b"PATH"], b"TORCHINDUCTOR_CACHE_DIR": bad}
    with running_kernel(env) as pid:
        found = kernel_cache_dirs([pid])
    sources = merge_sources((("inductor", str(good), "server", False),), found)
    sample = scan_sources(sources, min_free_pct=0.0)
    by_path = {d.path: d for d in sample.dirs}
    shown = os.fsdecode(bad).encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    assert shown.endswith("/caf\ufffd/torchinductor_me")
    refused = by_path[shown]
    assert refused.exists
    assert not refused.clearable
    assert refused.refusal == (
        f"its path is not UTF-8 text (the byte 0xe9 at character {len(str(tmp_path)) + 4}), "
        "so it is not cleared from here"
    )
    json.dumps(sample.to_dict(), ensure_ascii=False).encode("utf-8")  # what the API sends
    assert len({d.id for d in sample.dirs}) == len(sample.dirs)
    ok = by_path[str(good)]
    assert (ok.clearable, ok.refusal, ok.size_bytes) == (True, None, 3500)
    cleared = clear_cache("inductor", str(good), expect=ok.identity)
    assert (cleared.freed_bytes, cleared.failed) == (3500, ())
    assert Path(os.fsdecode(bad)).is_dir()


def test_a_kernels_relative_cache_path_is_its_own_folders(tmp_path: Path) -> None:
    here = tmp_path / "notebooks"  # the kernel's working folder (the notebook's)
    here.mkdir()
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": "build/inductor",
        "TRITON_CACHE_DIR": "../triton",
        "TMPDIR": "scratch",
    }
    with running_kernel(env, cwd=here) as pid:
        found = kernel_cache_dirs([pid])
    user = os.environ.get("USER") or Path(inductor_cache_dir({})).name.removeprefix(
        "torchinductor_"
    )
    assert found == (
        ("inductor", str(here / "build" / "inductor"), "kernel", True),
        ("inductor", str(here / "scratch" / f"torchinductor_{user}"), "kernel", False),
        ("triton", str(tmp_path / "triton"), "kernel", True),
    )
    assert Path.cwd() != here  # not the server's folder
