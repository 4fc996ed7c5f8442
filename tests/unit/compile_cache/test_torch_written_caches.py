"""Caches that torch really wrote are recognised whole and cleared whole; anything else is refused.

The reference is made by compiling with this torch (``torch_caches``, tests/conftest.py):
Inductor on CPU with the Python wrapper into torch's default directory, and with the C++ wrapper
into a configured ``TORCHINDUCTOR_CACHE_DIR`` (whose ``precompiled_headers/`` torch still puts
in the default directory).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from jupyter_gpu.compile_cache import CacheRefused, clear_cache, refusal, scan_dir, trim_cache
from jupyter_gpu.compile_cache.recognise import recognise
from tests.compile_cache_reference import Reference


def _copy(src: Path, dst_parent: Path) -> Path:
    """A copy under the same name (torch's name for a default cache is part of the check)."""
    dst = dst_parent / src.name
    shutil.copytree(src, dst, symlinks=True)
    return dst


def _files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file() or p.is_symlink())


def test_every_file_a_real_compile_wrote_is_recognised(torch_caches: Reference) -> None:
    caches = [(torch_caches.default, False), (torch_caches.configured, True)]
    if torch_caches.configured_headers is not None:
        caches.append((torch_caches.configured_headers, False))
    for path, configured in caches:
        tree = recognise("inductor", str(path), configured)
        seen = sorted(f.name for f in tree.files())
        assert seen == sorted(p.name for p in _files(path)), path
        assert seen, f"{path}: the compile wrote nothing"
        assert refusal("inductor", str(path), configured)[0] is None
    top = {p.name for p in torch_caches.default.iterdir()}
    assert {"fxgraph", "locks"} <= top, top
    if torch_caches.configured_headers is not None:  # torch 2.8+: the 155 MB header of issue 19
        headers = torch_caches.default / "precompiled_headers"
        assert any(p.name.endswith(".h.gch") for p in headers.iterdir())
        assert {p.name for p in torch_caches.configured_headers.iterdir()} == {
            "precompiled_headers"
        }


@pytest.mark.xdist_group("torch_default_links")  # as test_server_cache_clear: hard links
def test_a_real_default_cache_is_cleared_whole(torch_caches: Reference, tmp_path: Path) -> None:
    cache = tmp_path / torch_caches.default.name  # hard links: the very files torch wrote
    shutil.copytree(torch_caches.default, cache, copy_function=os.link)
    _, size, count = scan_dir(str(cache))
    result = clear_cache("inductor", str(cache))
    # Each file still has its name in the reference (a hard link): removing this one freed nothing.
    assert (result.freed_bytes, result.files_removed, result.failed) == (0, count, ())
    assert size > 0
    assert cache.is_dir()
    assert list(cache.iterdir()) == []


def test_remove_root_takes_the_folder_too(torch_caches: Reference, tmp_path: Path) -> None:
    cache = _copy(torch_caches.configured, tmp_path)
    result = clear_cache("inductor", str(cache), configured=True, remove_root=True)
    assert result.failed == ()
    assert not cache.exists()


def test_trim_removes_the_oldest_entries_first(torch_caches: Reference, tmp_path: Path) -> None:
    cache = _copy(torch_caches.configured, tmp_path)
    code_dirs = sorted(p for p in cache.iterdir() if len(p.name) == 2)
    assert len(code_dirs) >= 2
    for age, folder in enumerate(code_dirs):  # in 2001, the first folder the oldest
        for f in folder.iterdir():
            os.utime(f, (1e9 + age * 1000, 1e9 + age * 1000))
    total = scan_dir(str(cache))[1]
    budget = total - 1  # one byte too many: the oldest entry goes, and only it
    result = trim_cache("inductor", str(cache), budget, configured=True)
    assert not code_dirs[0].exists()
    assert all(d.exists() for d in code_dirs[1:])
    assert result.freed_bytes >= 1
    assert scan_dir(str(cache))[1] == total - result.freed_bytes <= budget
    assert refusal("inductor", str(cache), configured=True)[0] is None  # still a whole cache


# What a user's project folder holds (issue 19), each in a real cache: refused by its own name.
FOREIGN = [
    ("db/data.bin", "`db/data.bin`: torch does not write this"),
    ("cache/results.csv", "`cache/results.csv`: torch does not write this"),
    ("cache/db/data.bin", "`cache/db/data.bin`: torch does not write this"),
    ("kernel/train.py", "`kernel/`: torch does not write this"),
    ("cpp", "`cpp`: torch does not write this"),
    ("notes.tmp.txt", "`notes.tmp.txt`: torch does not write this"),
    ("fxgraph/notes.txt", "`fxgraph/notes.txt`: torch does not write this"),
    ("locks/README.md", "`locks/README.md`: torch does not write this"),
    ("precompiled_headers/mine.h", "`precompiled_headers/mine.h`: torch does not write this"),
    ("triton/0/model.bin", "`triton/0/model.bin`: torch does not write this"),
]


@pytest.mark.parametrize(("rel", "reason"), FOREIGN, ids=[r for r, _ in FOREIGN])
def test_a_file_torch_does_not_write_refuses_the_whole_cache(
    torch_caches: Reference, tmp_path: Path, rel: str, reason: str
) -> None:
    cache = _copy(torch_caches.configured, tmp_path)  # the small one: no 155 MB header
    (cache / rel).parent.mkdir(parents=True, exist_ok=True)
    (cache / rel).write_bytes(b"mine")
    before = _files(cache)
    assert refusal("inductor", str(cache), configured=True)[0] == reason
    with pytest.raises(CacheRefused) as err:
        clear_cache("inductor", str(cache), configured=True)
    assert err.value.reason == reason
    with pytest.raises(CacheRefused):
        trim_cache("inductor", str(cache), 0, configured=True)
    assert _files(cache) == before  # nothing deleted


def test_a_project_folder_set_as_the_cache_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "project"
    for rel in (
        "ab/figure.png",
        "xy/run.py",
        "cache/results.csv",
        "kernel/train.py",
        "cpp",
        "notes.tmp.txt",
        "db/data.bin",
    ):
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(rel)
    before = _files(project)
    reason, _ = refusal("inductor", str(project), configured=True)
    assert reason == "`ab/figure.png`: torch does not write this"
    with pytest.raises(CacheRefused):
        clear_cache("inductor", str(project), configured=True)
    assert _files(project) == before


def test_links_and_special_files_are_refused(torch_caches: Reference, tmp_path: Path) -> None:
    cache = _copy(torch_caches.configured, tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (cache / "locks" / ("c" + "q" * 51 + ".lock")).symlink_to(outside / "x")
    assert refusal("inductor", str(cache), configured=True)[0] == (
        f"`locks/c{'q' * 51}.lock`: a symbolic link "
        "(torch writes none, and links are never followed)"
    )
    (cache / "locks" / ("c" + "q" * 51 + ".lock")).unlink()
    os.mkfifo(cache / "locks" / ("c" + "r" * 51 + ".lock"))
    assert "not a regular file" in (refusal("inductor", str(cache), configured=True)[0] or "")


def test_triton_names_as_its_cache_writes_them(tmp_path: Path) -> None:
    """Triton's layout (runtime/cache.py, 3.0 to 3.x); the GPU check compiles real kernels."""
    cache = tmp_path / "home" / ".triton" / "cache"
    new_key, old_key = "SWIUZ4JKU6GBUSCR5ONNBLSWBXFTYPBHURCALH2YIZXVDCPBH6OQ", "a" * 64
    kernel = cache / new_key
    kernel.mkdir(parents=True)
    for stage in ("json", "ttir", "ttgir", "llir", "ptx", "cubin"):
        (kernel / f"triton_poi_fused_add_0.{stage}").write_bytes(b"k")
    (kernel / "__grp__triton_poi_fused_add_0.json").write_text("{}")
    staging = kernel / "tmp.pid_41_0b5cc4a2-6f6d-4bd0-9a41-8a6c0b1d2e3f"  # 3.2+: mid-write
    staging.mkdir()
    (staging / "triton_poi_fused_add_0.cubin").write_bytes(b"k")
    (cache / old_key).mkdir()
    (cache / old_key / "cuda_utils.so").write_bytes(b"s")
    (cache / old_key / "triton_.cubin.tmp.pid_41_123456").write_bytes(b"s")  # up to 3.1
    (cache / old_key / "__triton_launcher.cpython-312-x86_64-linux-gnu.so").write_bytes(b"s")
    assert refusal("triton", str(cache))[0] is None
    (kernel / "weights.pt").write_bytes(b"w")
    assert refusal("triton", str(cache))[0] == f"`{new_key}/weights.pt`: torch does not write this"
    (kernel / "weights.pt").unlink()
    assert clear_cache("triton", str(cache)).files_removed == 11
    assert list(cache.iterdir()) == []


def test_the_names_inductor_wrote_with_triton_on_an_h200(tmp_path: Path) -> None:
    """What max-autotune wrote beside its kernels on the H200 (GPU run 1 of 2026-12-01)."""
    cache = tmp_path / "torchinductor_user"
    key = "c63xexmm6lw4owa4ane4bze4ubjsbhzooqol4atsr2g7ubwhiubd"
    code = cache / key[1:3]
    code.mkdir(parents=True)
    for suffix in ("py", "kernel_perf", "best_config"):  # a benchmarked fusion, its config
        (code / f"{key}.{suffix}").write_text("0.01")
    assert refusal("inductor", str(cache))[0] is None
    (code / f"{key}.kernel_perf.bak").write_text("0.01")
    assert refusal("inductor", str(cache))[0] == (
        f"`{key[1:3]}/{key}.kernel_perf.bak`: torch does not write this"
    )
