"""On a real GPU: caches torch.compile writes with Triton kernels are recognised and cleared.

    python3 -m pytest -m gpu tests/gpu/test_compile_cache_gpu.py -x -q

Two small compiles on CUDA run at once, each in a fresh process with its own ``TMPDIR``:

- ``split``: ``TORCHINDUCTOR_CACHE_DIR`` and ``TRITON_CACHE_DIR`` both set (Triton's own layout);
- ``inductor``: only ``TORCHINDUCTOR_CACHE_DIR``, with ``max-autotune-no-cudagraphs`` (notebook
  06's GPU case): Triton's cache under ``triton/<device>/``, autotuning results beside it.

Every cache (and the ``TMPDIR`` default one, if torch wrote it) must be recognised, then cleared
to empty. Writes ``compile_cache_gpu.json`` to ``$JUPYTER_GPU_OUT`` when set: per cache the
files, bytes, refusal, and the shapes of the names (hashes masked), to refine
``jupyter_gpu/compile_cache/shapes.py`` from if something is refused.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.outputs import write_json  # noqa: E402 (after the path set-up)
from jupyter_gpu.compile_cache import clear_cache, refusal, scan_dir  # noqa: E402 (path set-up)

pytestmark = pytest.mark.gpu

COMPILE = """
import sys
import torch

x = torch.randn(256, 256, device="cuda")
if sys.argv[1] == "split":
    torch.compile(lambda a: (a.sin() * 2).softmax(-1))(x)
else:
    w = torch.randn(256, 256, device="cuda")
    torch.compile(lambda a, b: torch.relu(a @ b + 1.0), mode="max-autotune-no-cudagraphs")(x, w)
torch.cuda.synchronize()
"""

_HASHES = re.compile(r"[a-z2-7]{51,52}|[A-Z2-7]{52}|[0-9a-f]{32,64}|\d+\.\d+")


def _shapes(path: Path) -> list[str]:
    """Every file's path in the cache with its hashes masked: what kinds of names torch wrote."""
    return sorted({_HASHES.sub("<h>", str(p.relative_to(path))) for p in path.rglob("*")})


def _compile(variant: str, tmp: Path) -> tuple[subprocess.Popen[str], dict[str, Path]]:
    dirs = {"tmpdir": tmp / variant / "tmp", "inductor": tmp / variant / "inductor"}
    if variant == "split":
        dirs["triton"] = tmp / variant / "triton"
    dirs["tmpdir"].mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in {"TRITON_CACHE_DIR", "TORCH_LOGS"}}
    env.update(TMPDIR=str(dirs["tmpdir"]), TORCHINDUCTOR_CACHE_DIR=str(dirs["inductor"]))
    if "triton" in dirs:
        env["TRITON_CACHE_DIR"] = str(dirs["triton"])
    proc = subprocess.Popen(
        [sys.executable, "-c", COMPILE, variant],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, dirs


def test_triton_caches_are_recognised_and_cleared(tmp_path: Path) -> None:
    runs = {variant: _compile(variant, tmp_path) for variant in ("split", "inductor")}
    seen: dict[str, Any] = {}
    for variant, (proc, dirs) in runs.items():
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{variant}: the compile failed:\n{err[-3000:]}"
        caches: list[tuple[Literal["inductor", "triton"], Path, bool]] = [
            ("inductor", dirs["inductor"], True)
        ]
        if "triton" in dirs:
            caches.append(("triton", dirs["triton"], True))
        caches += [("inductor", p, False) for p in dirs["tmpdir"].glob("torchinductor_*")]
        for kind, path, configured in caches:
            _, size, files = scan_dir(str(path))
            reason, _ = refusal(kind, str(path), configured)
            seen[f"{variant}:{kind}:{path.name}"] = {
                "files": files,
                "bytes": size,
                "refusal": reason,
                "shapes": _shapes(path),
            }
    write_json("compile_cache_gpu.json", seen)
    refused = {name: s["refusal"] for name, s in seen.items() if s["refusal"] is not None}
    assert not refused, f"torch's own caches were refused: {refused}"
    split = runs["split"][1]
    assert seen["split:triton:triton"]["files"] > 0, "Triton wrote no kernel"
    assert not (split["inductor"] / "triton").exists()  # TRITON_CACHE_DIR took them
    assert (runs["inductor"][1]["inductor"] / "triton").is_dir()
    for variant, (_, dirs) in runs.items():
        for key in ("inductor", "triton"):
            if key in dirs:
                kind = "triton" if key == "triton" else "inductor"
                result = clear_cache(kind, str(dirs[key]), configured=True)
                assert result.failed == (), f"{variant}:{key}: {result.failed}"
                assert list(dirs[key].iterdir()) == [], f"{variant}:{key} was not emptied"
