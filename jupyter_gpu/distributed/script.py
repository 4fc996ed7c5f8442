"""The run folder of one ``%%torchrun`` cell, and the torchrun command line that runs it.

The folder holds ``cell.py`` (the cell as written), ``run.json`` (its settings) and ``main.py``,
the script torchrun runs once per rank: a short preamble that puts the notebook's import path
in place, then hands over to ``jupyter_gpu.distributed.rank_main``, which initialises the process
group and runs the cell. The ranks write their output, errors and result into the same folder.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from jupyter_gpu.compile_cache import ClearResult, remove_folder_made_here
from jupyter_gpu.distributed.rendezvous import Endpoint

#: The run folder, in torchrun's and every rank's environment (``torchrun_result`` writes there).
RUN_DIR_ENV = "JUPYTER_GPU_TORCHRUN_DIR"
# The pid of the kernel that ran the cell: each rank ends itself when that process ends.
KERNEL_PID_ENV = "JUPYTER_GPU_KERNEL_PID"

MAIN_TEMPLATE = """\
# Written by %%torchrun for one notebook cell; torchrun runs it once per rank:
#   {command}
# The preamble (jupyter_gpu.distributed.rank_main) initialises the process group, binds rank,
# local_rank, world_size and device, then runs cell.py (the cell as written) as __main__.
import sys

sys.path[:0] = [p for p in {path!r} if p not in sys.path]
from jupyter_gpu.distributed.rank_main import main

main({config!r})
"""


@dataclass(frozen=True)
class LaunchSpec:
    """How to run a cell with torchrun (the magic's options, checked).

    Attributes:
        nproc_per_node: ranks on this machine.
        backend: ``nccl`` (one GPU per rank) or ``gloo`` (CPU).
        timeout_s: how long a collective (or the rendezvous) may wait for every rank.
        nnodes: machines in the job; each runs the same cell with its own ``node_rank``.
        node_rank: this machine's place; node 0 hosts the rendezvous at ``endpoint``.
        endpoint: the rendezvous store; ``None`` on one machine (a free port is picked).
        env: variables set for the ranks on top of the kernel's environment.
        result_limit_bytes: the most ``torchrun_result`` may send back.
        color: colour the rank prefixes of the output.
    """

    nproc_per_node: int
    backend: str
    timeout_s: float = 300.0
    nnodes: int = 1
    node_rank: int = 0
    endpoint: Endpoint | None = None
    env: dict[str, str] = field(default_factory=dict)
    result_limit_bytes: int = 512 * 2**20
    color: bool = True

    @property
    def world_size(self) -> int:
        """Ranks in the whole job."""
        return self.nproc_per_node * self.nnodes


def torchrun_args(spec: LaunchSpec) -> list[str]:
    """The options of torchrun for ``spec`` (without the script)."""
    args = [f"--nproc-per-node={spec.nproc_per_node}", "--max-restarts=0"]
    if spec.endpoint is None:
        return [*args, "--standalone"]
    timeout = max(1, round(spec.timeout_s))
    # is_host: node 0 hosts the store, the others only connect (torch would otherwise guess
    # from the hostname, and two agents of one machine would race for the port). read_timeout:
    # how long the others wait for node 0's store to come up (and for each store reply).
    host = "true" if spec.node_rank == 0 else "false"
    conf = f"join_timeout={timeout},read_timeout={max(60, timeout)},is_host={host}"
    return [
        *args,
        f"--nnodes={spec.nnodes}",
        f"--node-rank={spec.node_rank}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={spec.endpoint}",
        f"--rdzv-conf={conf}",
    ]


_RUN_DIR_PREFIX = "torchrun-"
_MADE: dict[Path, tuple[int, int]] = {}
"""The run folders this process made -> their ``(st_dev, st_ino)``: the only ones it removes."""


def write_run_dir(source: str, spec: LaunchSpec, *, cwd: str, base: str | None = None) -> Path:
    """Create the run folder for ``source`` (a cell) and ``spec``; returns its path.

    A fresh ``mkdtemp`` folder (mode 0700, this user's): :func:`remove_run_dir` removes it.
    """
    run_dir = Path(tempfile.mkdtemp(prefix=_RUN_DIR_PREFIX, dir=base))
    made = run_dir.stat()
    _MADE[run_dir] = (made.st_dev, made.st_ino)
    cell = run_dir / "cell.py"
    cell.write_text(source)
    config = {
        "cell_path": str(cell),
        "backend": spec.backend,
        "timeout_s": spec.timeout_s,
        "result_limit_bytes": spec.result_limit_bytes,
    }
    (run_dir / "run.json").write_text(json.dumps(config, indent=1))
    # The cell imports what the notebook can: its folder first (%%writefile modules), then the
    # kernel's import path (entries a notebook added with sys.path.append too).
    path = [cwd, *(p for p in sys.path if p and p != cwd)]
    command = " ".join(["python -m torch.distributed.run", *torchrun_args(spec), "main.py"])
    (run_dir / "main.py").write_text(
        MAIN_TEMPLATE.format(command=command, path=path, config=str(run_dir / "run.json"))
    )
    return run_dir


def remove_run_dir(run_dir: Path) -> ClearResult:
    """Remove a run folder that :func:`write_run_dir` made in this process, and nothing else.

    Only while it is still that folder (its device and inode when made), through file
    descriptors (``jupyter_gpu.compile_cache``, the package that deletes): a link or another
    folder put in its place is left whole. What was left is in the result's ``failed``.
    """
    made = _MADE.pop(run_dir, None)
    if made is None:
        return ClearResult(0, 0, (f"`{run_dir}`: not a run folder made here: left alone",))
    return remove_folder_made_here(str(run_dir), made)


def rank_environment(spec: LaunchSpec, run_dir: Path) -> dict[str, str]:
    """The kernel's environment, with the cell's ``--env`` on top, for torchrun and the ranks.

    Passed through whole, so settings such as ``NCCL_NVLS_ENABLE=0`` stay set in the ranks.
    """
    env = dict(os.environ)
    # matplotlib's inline backend needs a kernel; a rank has none.
    if env.get("MPLBACKEND", "").startswith("module://matplotlib_inline"):
        env["MPLBACKEND"] = "Agg"
    env.update(spec.env)
    env[RUN_DIR_ENV] = str(run_dir)
    env[KERNEL_PID_ENV] = str(os.getpid())
    env["PYTHONUNBUFFERED"] = "1"
    if spec.backend == "nccl":
        # The watchdog's monitor ends a rank whose watchdog itself hangs (default 8 min): keep
        # it in step with the cell's timeout.
        env.setdefault("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", str(max(60, round(spec.timeout_s) + 60)))
    return env
