"""Nsight Systems from notebook 04: find ``nsys``, run a script under it, read its NVTX summary.

``nsys profile -t cuda,nvtx`` records the CUDA API calls, kernels and copies of a process, and
the NVTX ranges its code marks (``torch.cuda.nvtx.range_push``/``range_pop``, or every op with
``torch.autograd.profiler.emit_nvtx``), into a ``.nsys-rep`` file for the Nsight Systems GUI;
``nsys stats --report nvtx_sum`` sums the ranges in a table (NVIDIA's *Nsight Systems User Guide*
and *Post-Collection Analysis Guide*). ``nsys`` ships with the CUDA toolkit and Nsight Systems,
not with PyTorch: many machines that train on GPUs do not have it, so :func:`find_nsys` says so
rather than failing.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: Where the CUDA toolkit and Nsight Systems put ``nsys`` when it is not on ``PATH``:
#: (folder, pattern below it).
_NSYS_PLACES = (
    ("/usr/local", "cuda*/bin/nsys"),
    ("/opt/nvidia/nsight-systems", "*/bin/nsys"),
)
#: ``nsys stats`` report names for the NVTX summary: newer releases, then older ones.
_NVTX_REPORTS = ("nvtx_sum", "nvtxsum")


def find_nsys() -> str | None:
    """The ``nsys`` executable: on ``PATH``, else where the toolkits install it; ``None``."""
    found = shutil.which("nsys")
    if found:
        return found
    for folder, pattern in _NSYS_PLACES:
        matches = sorted(Path(folder).glob(pattern))
        if matches:
            return str(matches[-1])
    return None


def profile_command(nsys: str, report: Path, script: Sequence[str]) -> list[str]:
    """``nsys profile -t cuda,nvtx -o REPORT --force-overwrite true <script>``.

    ``report`` is the output name without ``.nsys-rep`` (nsys adds it).
    """
    return [
        nsys,
        "profile",
        "-t",
        "cuda,nvtx",
        "-o",
        str(report),
        "--force-overwrite",
        "true",
        *script,
    ]


def steps_script(*, steps: int, size: int, batch: int, width: int) -> list[str]:
    """This interpreter running :mod:`.nvtx_steps` (notebook 04's CNN, NVTX ranges per phase)."""
    return [
        sys.executable,
        "-m",
        "jupyter_gpu.tutorials.nvtx_steps",
        f"--steps={steps}",
        f"--size={size}",
        f"--batch={batch}",
        f"--width={width}",
    ]


@dataclass(frozen=True)
class NvtxRow:
    """One NVTX range in ``nsys stats``' summary: its name, count and times (seconds)."""

    name: str
    instances: int
    total_s: float
    mean_s: float


def parse_nvtx_sum(text: str) -> list[NvtxRow]:
    """The rows of ``nsys stats --report nvtx_sum --format csv``'s output.

    nsys prints a few lines of its own before the CSV table; the table starts at the header
    that has ``Range`` and ``Instances``. Times are in nanoseconds there. Rows it cannot read
    are skipped; no table gives ``[]``.
    """
    lines = text.splitlines()
    start = next(
        (i for i, line in enumerate(lines) if "Range" in line and "Instances" in line), None
    )
    if start is None:
        return []
    rows = []
    for record in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        try:
            name = (record.get("Range") or "").strip()
            instances = int(float(record.get("Instances") or 0))
            total_ns = float(record.get("Total Time (ns)") or record.get("Total Time") or 0)
            mean_ns = float(record.get("Avg (ns)") or record.get("Average") or 0)
        except ValueError:
            continue
        if name:
            rows.append(NvtxRow(name, instances, total_ns / 1e9, mean_ns / 1e9))
    return rows


@dataclass(frozen=True)
class NsysRun:
    """What one ``nsys profile`` + ``nsys stats`` run gave."""

    command: list[str]
    returncode: int
    report: Path | None
    rows: list[NvtxRow]
    #: The last lines nsys printed when something failed ("" otherwise).
    problem: str = ""


def run_nsys(
    nsys: str, report: Path, script: Sequence[str], *, timeout_s: float = 300.0
) -> NsysRun:
    """Profile ``script`` under nsys, then sum its NVTX ranges.

    Never raises for nsys' own failures: they come back in ``problem`` (a notebook cell must
    still say what happened).
    """
    command = profile_command(nsys, report, script)
    try:
        done = subprocess.run(  # noqa: S603  # nsys, and our own module under it
            command, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return NsysRun(command, -1, None, [], f"{type(err).__name__}: {err}")
    written = report.with_name(report.name + ".nsys-rep")
    if done.returncode != 0 or not written.is_file():
        return NsysRun(command, done.returncode, None, [], _tail(done.stderr or done.stdout))
    problem = ""
    for name in _NVTX_REPORTS:
        stats = subprocess.run(  # noqa: S603
            [nsys, "stats", "--report", name, "--format", "csv", str(written)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        rows = parse_nvtx_sum(stats.stdout)
        if rows:
            return NsysRun(command, done.returncode, written, rows)
        problem = _tail(stats.stderr or stats.stdout)
    return NsysRun(command, done.returncode, written, [], problem)


def _tail(text: str, lines: int = 4) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
