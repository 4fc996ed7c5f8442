"""Read what torch.compile generated: ``TORCH_LOGS="output_code"``, ``TORCH_TRACE`` (notebook 01).

Both are environment variables that torch reads when it starts, so :func:`compile_with_logs`
runs one compile in a fresh Python process with them set: the notebook's compile probe
(``python -m jupyter_gpu.tutorials.compile_probe``, a Linear-GELU-Linear-LayerNorm block,
compiled with Inductor and called once under ``torch.no_grad()``), with a fresh Inductor cache
so that the code is generated, not found.

- ``TORCH_LOGS="output_code"`` logs the Python module Inductor wrote for each graph, on stderr:
  the generated kernels (Triton on a GPU, C++ on a CPU) and the wrapper that calls them and the
  library matmuls (``extern_kernels.mm``); ``Output code written to: ...`` names the file.
  :func:`kernel_names` and :func:`first_kernel` read it.
- ``TORCH_TRACE=<folder>`` writes a structured log there (one ``dedicated_log_torch_trace_*.log``
  per process): a JSON envelope per record (a compile's start, its graphs at each stage, the
  output code, timings), each followed by its payload lines. :func:`summarize_trace` counts the
  records by kind. ``tlparse`` (``pip install tlparse``, a separate package) turns the folder into
  an HTML report: ``tlparse <folder> --latest -o tl_out/`` (PyTorch's docs, *tlparse /
  TORCH_TRACE*). The log holds the model's code, not its weights.

The temporary folder stays on disk (only the compile-cache package deletes files), for the
reader to open or to give to tlparse; :class:`CompileLogs` says where it is and its size.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CompileLogs",
    "TraceSummary",
    "compile_with_logs",
    "first_kernel",
    "kernel_names",
    "output_code_lines",
    "summarize_trace",
]

# A log line: level and date, time, thread, file:line, "]", the frame ("[0/0]"), the artifact
# ("[__output_code]"), then the text.
_OUTPUT_CODE = re.compile(
    r"^[VIWE]\d{4} [\d:.]+ +\d+ \S+\] (?:\[[^\]]*\] )?\[__output_code\] ?(.*)$"
)
# A generated kernel's definition: its name, "= async_compile.triton(" on a GPU or
# "= async_compile.cpp_pybinding(" on a CPU, then its source in a string.
_KERNEL = re.compile(r"^(\w+) = async_compile\.(triton|cpp_pybinding|cpp|cuda)\(")
# The envelope's keys that say where a record belongs, not what it is.
_WHERE_KEYS = frozenset(
    ("frame_id", "frame_compile_id", "attempt", "has_payload", "compiled_autograd_id", "rank")
)


def output_code_lines(log: str) -> list[str]:
    """The lines of the ``output_code`` log, without torch's logging prefix, in order."""
    found = []
    for line in log.splitlines():
        match = _OUTPUT_CODE.match(line)
        if match:
            found.append(match.group(1))
    return found


def kernel_names(code: list[str]) -> list[str]:
    """The kernels Inductor generated in ``code`` (``triton_poi_fused_gelu_0``...), in order."""
    names = []
    for line in code:
        match = _KERNEL.match(line)
        if match and match.group(1) not in names:
            names.append(match.group(1))
    return names


def first_kernel(code: list[str], lines: int = 24) -> list[str]:
    """The head of the first generated kernel: from its definition, ``lines`` lines.

    For Triton the kernel's source starts at its ``@triton.jit``; for C++ at the
    ``async_compile.cpp_pybinding`` line (its ``extern "C"`` function follows). Empty when
    ``code`` holds no generated kernel (only library calls).
    """
    for i, line in enumerate(code):
        if _KERNEL.match(line):
            start = i
            for j in range(i, min(len(code), i + 60)):
                if code[j].strip() == "@triton.jit":
                    start = j
                    break
            return code[start : start + lines]
    return []


@dataclass(frozen=True)
class TraceSummary:
    """What ``TORCH_TRACE`` wrote into its folder.

    Attributes:
        folder: the folder.
        files: each file's name and size in bytes.
        kinds: how many records of each kind (``dynamo_output_graph``, ``artifact:
            torch_version``...), most frequent first.
    """

    folder: str
    files: tuple[tuple[str, int], ...]
    kinds: tuple[tuple[str, int], ...]

    @property
    def records(self) -> int:
        return sum(n for _, n in self.kinds)

    @property
    def size_bytes(self) -> int:
        return sum(size for _, size in self.files)


def _kind(envelope: dict[str, object]) -> str:
    what = [k for k in envelope if k not in _WHERE_KEYS]
    if not what:
        return "other"
    kind = what[0]
    detail = envelope[kind]
    if kind == "artifact" and isinstance(detail, dict):
        return f"artifact: {detail.get('name')}"
    return kind


def summarize_trace(folder: str | Path) -> TraceSummary:
    """Count the records of every log file in a ``TORCH_TRACE`` folder, by kind.

    A record is a line that does not start with a tab: torch's log prefix, then a JSON
    envelope (``{"dynamo_start": {...}, "frame_id": 0, ...}``); its payload lines follow,
    each starting with a tab. A line whose envelope is not JSON counts as ``unreadable``.
    """
    root = Path(folder)
    files = sorted(p for p in root.iterdir() if p.is_file()) if root.is_dir() else []
    kinds: Counter[str] = Counter()
    for path in files:
        with path.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if not line.strip() or line.startswith("\t"):
                    continue
                _, _, rest = line.partition("] ")
                try:
                    envelope = json.loads(rest)
                except json.JSONDecodeError:
                    kinds["unreadable"] += 1
                    continue
                kinds[_kind(envelope) if isinstance(envelope, dict) else "other"] += 1
    return TraceSummary(
        str(root),
        tuple((p.name, p.stat().st_size) for p in files),
        tuple(kinds.most_common()),
    )


@dataclass(frozen=True)
class CompileLogs:
    """One compile's generated code (from ``TORCH_LOGS``) and structured trace (``TORCH_TRACE``).

    Attributes:
        device: where the probe ran (``cuda``: Triton kernels; ``cpu``: C++).
        code: the ``output_code`` log's lines.
        written_to: the file Inductor wrote the code to (``Output code written to:``), if logged.
        trace: what ``TORCH_TRACE`` wrote.
        folder: the temporary folder holding the trace and the fresh cache (it stays).
        seconds: how long the child took, start of Python to exit.
    """

    device: str
    code: tuple[str, ...]
    written_to: str | None
    trace: TraceSummary
    folder: str
    seconds: float

    @property
    def kernels(self) -> list[str]:
        return kernel_names(list(self.code))


def compile_with_logs(
    device: str, *, width: int = 256, batch: int = 64, parent: str | None = None
) -> CompileLogs:
    """Compile the probe once in a fresh process with ``TORCH_LOGS`` and ``TORCH_TRACE`` set.

    The trace and the generated code stay in a new folder (under ``parent``, default the
    temporary folder) for the reader to open with ``tlparse``: it is theirs to remove.

    Raises:
        RuntimeError: the child failed (its stderr's end is in the message).
    """
    folder = Path(tempfile.mkdtemp(prefix="jupyter-gpu-torch-trace-", dir=parent))
    trace_dir, cache_dir = folder / "trace", folder / "inductor-cache"
    env = {k: v for k, v in os.environ.items() if k != "TORCH_LOGS"}
    env |= {
        "TORCH_LOGS": "output_code",
        "TORCH_TRACE": str(trace_dir),
        "TORCHINDUCTOR_CACHE_DIR": str(cache_dir),
    }
    command = [sys.executable, "-m", "jupyter_gpu.tutorials.compile_probe", "--backend"]
    command += ["inductor", "--device", device, "--sizes", str(batch), "--width", str(width)]
    start = time.perf_counter()
    done = subprocess.run(  # noqa: S603  # our own module, this Python
        command, capture_output=True, text=True, env=env, check=False
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"the compile with TORCH_LOGS failed:\n{done.stderr[-3000:]}")
    code = output_code_lines(done.stderr)
    written = next(
        (line.split(":", 1)[1].strip() for line in code if line.startswith("Output code written")),
        None,
    )
    return CompileLogs(
        device, tuple(code), written, summarize_trace(trace_dir), str(folder), seconds
    )
