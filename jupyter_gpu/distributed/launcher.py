"""Run a cell on every rank with ``python -m torch.distributed.run``: ``%%torchrun``'s launcher.

:func:`launch` writes the run folder, starts torchrun with the kernel's own interpreter in a
session of its own (the kernel's interrupt signal must not reach the ranks half-way: the
launcher stops them itself), streams the ranks' output into the cell, and then either returns a
:class:`RunOutcome` or raises :class:`TorchrunError` with the failing rank's traceback. Fresh
processes, not ``fork``: it works after the kernel initialised CUDA.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jupyter_gpu.distributed.agent import BOOTSTRAP
from jupyter_gpu.distributed.failure import Diagnosis, environment_report, explain, started_ranks
from jupyter_gpu.distributed.output import RankOutput
from jupyter_gpu.distributed.process import RankId, alive, stop_tree
from jupyter_gpu.distributed.result import load_result
from jupyter_gpu.distributed.script import (
    LaunchSpec,
    rank_environment,
    remove_run_dir,
    torchrun_args,
    write_run_dir,
)

POLL_S = 0.05

# Where this package is imported from: torchrun's agent imports it from there when the
# interpreter's own path lacks it (a kernel that found it through a path it was given).
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class TorchrunError(Exception):
    """A ``%%torchrun`` cell failed: a rank raised, timed out, crashed, or torchrun failed.

    IPython shows :meth:`render` instead of the launcher's own traceback.

    Attributes:
        diagnosis: what went wrong (the cause's rank, traceback, notes).
        run_dir: the run folder, kept for inspection (rank logs, torchrun.log).
    """

    def __init__(
        self, diagnosis: Diagnosis, run_dir: Path, env: Mapping[str, str], backend: str
    ) -> None:
        super().__init__(diagnosis.headline)
        self.diagnosis = diagnosis
        self.run_dir = run_dir
        self._env = dict(env)
        self._backend = backend

    def render(self) -> list[str]:
        """The report as lines: headline, the cause's traceback, notes, the environment."""
        d = self.diagnosis
        lines = [f"\x1b[31m%%torchrun failed: {d.headline}\x1b[0m", ""]
        if d.traceback:
            lines += [*d.traceback.rstrip("\n").splitlines(), ""]
        lines += [f"- {note}" for note in d.notes]
        if d.show_environment:
            what = "NCCL and torch.distributed" if self._backend == "nccl" else "gloo"
            lines += ["", f"The environment the ranks ran with ({what}):"]
            rows = environment_report(self._env, self._backend)
            width = max(len(name) for name, _, _ in rows)
            for name, value, hint in rows:
                shown = value or '""'  # set, but empty
                lines.append(f"  {name:<{width}}  {shown:<9}  {hint}".rstrip())
        lines.append(f"Logs of every rank: {self.run_dir}")
        return lines

    def _render_traceback_(self) -> list[str]:  # IPython's hook for custom error display
        return self.render()


@dataclass(frozen=True)
class RunOutcome:
    """A finished run: its size, its time, and what rank 0 sent with ``torchrun_result``."""

    world_size: int
    local_ranks: int
    elapsed_s: float
    has_result: bool
    result: Any


def _default_write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def launch(
    source: str,
    spec: LaunchSpec,
    *,
    cwd: str,
    write: Callable[[str], None] = _default_write,
    notebook_names: frozenset[str] = frozenset(),
    keep_run_dir: bool = False,
) -> RunOutcome:
    """Run ``source`` on ``spec.nproc_per_node`` ranks of this machine (and join other nodes).

    Blocks until every rank has finished. ``KeyboardInterrupt`` (the stop button) stops torchrun
    and every process under it, then propagates.

    Args:
        source: the cell.
        spec: the checked options.
        cwd: the ranks' working folder (the notebook's), first on their import path.
        write: where the ranks' prefixed output goes.
        notebook_names: the notebook's variable names, for the hint of a ``NameError``.
        keep_run_dir: keep the run folder after a success too (it is kept after a failure).

    Raises:
        TorchrunError: a rank failed, a collective timed out, or torchrun could not start.
        KeyboardInterrupt: interrupted; every process of the run was stopped first.
    """
    run_dir = write_run_dir(source, spec, cwd=cwd)
    env = rank_environment(spec, run_dir)
    argv = [
        sys.executable,
        "-c",
        BOOTSTRAP,  # agent.py: tied to the kernel, ended without finalizing
        _PACKAGE_ROOT,
        str(os.getpid()),
        *torchrun_args(spec),
        # torch's agent makes a log folder for every run (/tmp/torchelastic_*, never removed)
        # unless told where: inside the run folder, it goes where the run folder goes.
        f"--log-dir={run_dir / 'elastic'}",
        str(run_dir / "main.py"),
    ]
    output = RankOutput(run_dir, spec.world_size, write, color=spec.color)
    log_path = run_dir / "torchrun.log"
    started = time.perf_counter()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(  # noqa: S603  # our own interpreter and arguments
            argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            while proc.poll() is None:
                output.poll()
                time.sleep(POLL_S)
        except BaseException:
            _stop(proc, run_dir, output, write)
            raise
    output.finish()
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        diagnosis = explain(
            run_dir,
            world_size=spec.world_size,
            timeout_s=spec.timeout_s,
            cell_source=source,
            torchrun_log=log_path.read_text(errors="replace"),
            notebook_names=notebook_names,
        )
        raise TorchrunError(diagnosis, run_dir, env, spec.backend)
    has_result, result = load_result(run_dir)
    if not keep_run_dir:
        remove_run_dir(run_dir)
    return RunOutcome(spec.world_size, spec.nproc_per_node, elapsed, has_result, result)


def rank_id(info: Mapping[str, object]) -> RankId:
    """A rank's pid and start time from its ``rank-N.json`` (no start time: an older rank)."""
    started = info.get("started_s")
    return int(str(info["pid"])), float(started) if isinstance(started, (int, float)) else None


def _stop(
    proc: subprocess.Popen[bytes], run_dir: Path, output: RankOutput, write: Callable[[str], None]
) -> None:
    """Stop every process of the run, even through more interrupts; then say what was done."""
    ranks: list[RankId] = []
    while True:
        try:
            ranks = [rank_id(info) for info in started_ranks(run_dir).values()]
            killed = stop_tree(proc, ranks)
            with contextlib.suppress(Exception):
                output.finish()
            break
        except KeyboardInterrupt:  # a second press of stop: keep cleaning up
            continue
    left = alive(ranks)
    how = f"; {len(killed)} had to be killed" if killed else ""
    status = (
        f"still running: {left}"
        if left
        else f"torchrun and its {len(ranks)} rank(s) have stopped{how}"
    )
    write(f"\n%%torchrun interrupted: {status} (logs: {run_dir})\n")
