"""Mount points inside a cache are never crossed, a bind mount of the same filesystem included
(issue 34, item 3): it has the device number of the folder it sits in, so only the mount table
(``/proc/self/mountinfo``) tells it apart.

The real bind mount needs root and a private mount namespace (``unshare -m``, in a child process,
so that the mount dies with it); where that cannot be made, the test is skipped and the same
check runs on a mount table read from a fixture.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jupyter_gpu.compile_cache import clear_cache, refusal, scan_dir
from jupyter_gpu.compile_cache import mounts as mounts_module
from jupyter_gpu.compile_cache.mounts import parse_mountinfo
from tests.compile_cache_races import KEY, small_cache

ROOT = Path(__file__).resolve().parents[3]
UNSHARE = ["unshare", "--mount", "--propagation", "private"]

# Two lines of a real mountinfo (proc_pid_mountinfo(5)), the second a bind mount whose path has a
# space and a backslash in it, as the kernel escapes them.
TABLE = (
    b"22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
    b"66 46 254:0 /tmp/bt/a /srv/my\\040cache\\134x rw,relatime - ext4 /dev/vda rw\n"
)


def test_the_mount_table_is_read_with_the_kernels_escapes() -> None:
    assert parse_mountinfo(TABLE) == frozenset({"/", "/srv/my cache\\x"})
    assert parse_mountinfo(b"66 46 254:0 / /srv/caf\\303\\251 rw - ext4 x rw\n") == {"/srv/café"}
    assert parse_mountinfo(b"") == frozenset()


def test_a_mount_point_in_the_table_is_neither_counted_nor_cleared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = small_cache(tmp_path)
    mount = cache.resolve() / "aa"  # as the table names it: the real path
    escaped = str(mount).replace("\\", "\\134").replace(" ", "\\040").encode()
    table = tmp_path / "mountinfo"
    table.write_bytes(TABLE + b"67 46 254:0 /elsewhere " + escaped + b" rw - ext4 /dev/vda rw\n")
    monkeypatch.setattr(mounts_module, "MOUNTINFO", str(table))
    assert scan_dir(str(cache)) == (True, 2000, 2)  # bb's file and the lock, not aa's two
    assert refusal("inductor", str(cache))[0] is None
    result = clear_cache("inductor", str(cache))
    assert result.failed == ("`aa/`: a mount point: not crossed",)
    assert sorted(p.name for p in (cache / "aa").iterdir()) == [f"{KEY}.py", f"{KEY}.so"]
    assert sorted(p.name for p in cache.iterdir()) == ["aa"]


BIND_MOUNTED = """
import json, subprocess, sys
from jupyter_gpu.compile_cache import clear_cache, scan_dir, scan_sources
cache, source = sys.argv[1], sys.argv[2]
subprocess.run(["mount", "--bind", source, cache + "/aa"], check=True)
scanned = scan_sources((("inductor", cache, "server", False),), min_free_pct=0.0).dirs[0]
result = clear_cache("inductor", cache)
print(json.dumps({
    "size": scanned.size_bytes,
    "clearable": scanned.clearable,
    "walked": scan_dir(cache)[1],
    "failed": list(result.failed),
    "freed": result.freed_bytes,
}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to bind-mount (the test table runs)")
def test_a_bind_mount_of_the_same_filesystem_is_never_crossed(tmp_path: Path) -> None:
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux) for a private mount namespace")
    cache = small_cache(tmp_path)
    source = tmp_path / "precious"  # the mount's source: torch-named files that are not the cache's
    source.mkdir()
    bait = source / f"{KEY}.py"
    bait.write_bytes(b"b" * 4321)
    assert source.stat().st_dev == cache.stat().st_dev  # the same filesystem: the same device
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(  # a private mount namespace: the bind mount dies with the child
        [*UNSHARE, sys.executable, "-c", BIND_MOUNTED, str(cache), str(source)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    if done.returncode != 0 and ("mount" in done.stderr or "unshare" in done.stderr):
        pytest.skip(f"cannot bind-mount here: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert bait.read_bytes() == b"b" * 4321, "a file in the bind mount's source was deleted"
    assert seen["failed"] == ["`aa/`: a mount point: not crossed"]
    assert (seen["size"], seen["walked"], seen["clearable"]) == (2000, 0, True)
    assert seen["freed"] == 2000  # bb's file (the lock is empty); nothing of the mount
    assert sorted(p.name for p in cache.iterdir()) == ["aa"]
