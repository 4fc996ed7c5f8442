"""``%%torchrun``: run a cell on several GPUs (DDP, FSDP) or several machines, with torchrun.

A thin parser over :mod:`jupyter_gpu.distributed`, which writes the cell to a script, runs it
with ``python -m torch.distributed.run`` in fresh processes and streams each rank's output; the
closing lines are ``report.py``'s.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import cell_magic, magics_class

from jupyter_gpu.magics.shell.args import (
    ShellMagics,
    argument,
    check_identifier,
    magic_arguments,
    parse,
)

DEFAULT_TIMEOUT_S = 300.0


def _env_pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not name.strip().replace("_", "").isalnum():
        raise argparse.ArgumentTypeError(
            f"--env {text!r}: write NAME=VALUE, e.g. --env NCCL_DEBUG=INFO"
        )
    return name.strip(), value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be more than 0 seconds")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return value


def visible_gpus(env: dict[str, str]) -> tuple[int, str | None]:
    """GPUs the ranks would see: NVML's count, cut by ``CUDA_VISIBLE_DEVICES`` if set."""
    from jupyter_gpu.nvml.topology import gpu_count

    count, reason = gpu_count()
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = []
        for entry in visible.split(","):
            if not entry.strip() or entry.strip().startswith("-"):
                break  # CUDA stops at the first invalid entry
            entries.append(entry)
        if len(entries) < count:
            reason = f"CUDA_VISIBLE_DEVICES={visible!r}"
        count = min(count, len(entries))
    return count, reason


@magics_class
class TorchrunMagics(ShellMagics):
    """``%%torchrun``."""

    @magic_arguments()
    @argument(
        "-n",
        "--nproc-per-node",
        type=_count,
        default=None,
        metavar="N",
        help="ranks on this machine (default: one per visible GPU; without a GPU give -n)",
    )
    @argument(
        "--backend",
        choices=("nccl", "gloo"),
        default=None,
        help="nccl: one GPU per rank (default with GPUs); gloo: CPU ranks (default without)",
    )
    @argument(
        "--timeout",
        type=_seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help="seconds a collective (or the rendezvous of several nodes) may wait for every "
        "rank before the cell fails and names the ranks that did not arrive "
        f"(default {DEFAULT_TIMEOUT_S:g})",
    )
    @argument(
        "-o",
        "--output",
        metavar="NAME",
        default=None,
        help="bind what rank 0 passes to torchrun_result(obj) to NAME in the notebook",
    )
    @argument(
        "--env",
        type=_env_pair,
        nargs="+",
        action="extend",
        default=[],
        metavar="NAME=VALUE",
        help="set variables for the ranks, on top of the kernel's environment "
        "(e.g. --env NCCL_DEBUG=INFO NCCL_P2P_DISABLE=1)",
    )
    @argument(
        "--nnodes",
        type=_count,
        default=1,
        metavar="M",
        help="machines in the job; run the same cell on each, with its own --node-rank",
    )
    @argument(
        "--node-rank",
        type=int,
        default=None,
        metavar="R",
        help="this machine's place among --nnodes (0 is the machine at --rdzv-endpoint)",
    )
    @argument(
        "--rdzv-endpoint",
        metavar="HOST:PORT",
        default=None,
        help="where the nodes meet (c10d rendezvous, hosted by node 0); "
        "one machine: leave it out, a free port is picked",
    )
    @argument(
        "--max-result",
        metavar="SIZE",
        default="512MB",
        help="the most torchrun_result may send back (default 512MB)",
    )
    @argument("--no-color", action="store_true", help="no colours in the rank prefixes")
    @cell_magic
    def torchrun(self, line: str, cell: str) -> Any:
        """Run this cell on several processes with torchrun: DDP, FSDP, several GPUs or nodes.

        Each rank is a fresh Python process started by ``python -m torch.distributed.run`` with
        this kernel's interpreter, so it works even after the notebook used CUDA. Before the
        cell runs, the process group is initialised, and these names are set:

            rank, local_rank, world_size   this process's place in the job
            device                         cuda:<local_rank> with nccl, cpu with gloo

        Every rank's output appears below the cell as it comes, prefixed [rank N]; rank 0's
        tqdm bar redraws in place. If a rank raises, the cell fails with that rank's
        traceback; the stop button ends every rank. Hand a result back from rank 0 with
        ``from jupyter_gpu import torchrun_result; torchrun_result(obj)`` and ``-o NAME``.

        Names from earlier cells: the ranks do NOT see the notebook's variables, functions or
        imports. Import what the cell needs inside it, and share code through a module: write
        it with ``%%writefile helpers.py`` (the ranks start in the notebook's folder, which is
        on their import path) or put it in an installed package, then ``import helpers`` in
        this cell.

        Several machines: run the same cell in a notebook on each machine, with the same
        ``--nnodes`` and ``--rdzv-endpoint`` (an address of node 0) and each machine's
        ``--node-rank``. Examples:

            %%torchrun -n 2
            %%torchrun -n 2 -o losses --timeout 60
            %%torchrun -n 8 --nnodes 2 --node-rank 0 --rdzv-endpoint node0:29500
        """
        args = parse(TorchrunMagics.torchrun, line)
        from jupyter_gpu.distributed import launch

        if not cell.strip():
            raise UsageError(
                "%%torchrun runs the cell below it on every rank, and this cell is empty: "
                "write the training code under the %%torchrun line."
            )
        if args.output is not None:
            check_identifier(args.output, "-o NAME")
        compile(cell, "<torchrun cell>", "exec")  # a SyntaxError shows now, not once per rank
        spec = self._spec(args)
        ns = self.shell.user_ns
        try:
            outcome = launch(
                cell,
                spec,
                cwd=str(Path.cwd()),
                notebook_names=frozenset(n for n in ns if not n.startswith("_")),
            )
        except KeyboardInterrupt:  # every rank has stopped (the launcher said so): no frames
            raise KeyboardInterrupt("%%torchrun was interrupted") from None
        from .report import show_finished, show_no_result

        show_finished(spec, outcome.elapsed_s)
        if args.output is None:
            return outcome.result if outcome.has_result else None
        if outcome.has_result:
            ns[args.output] = outcome.result
        else:
            show_no_result(args.output, nnodes=spec.nnodes)
        return None

    def _spec(self, args: argparse.Namespace) -> Any:
        from jupyter_gpu.distributed import EndpointError, LaunchSpec, parse_endpoint, parse_size
        from jupyter_gpu.distributed.rendezvous import check_host_endpoint

        env = dict(args.env)
        merged = {**os.environ, **env}
        gpus, why_none = visible_gpus(merged)
        backend = args.backend or ("nccl" if gpus else "gloo")
        nproc = args.nproc_per_node
        if nproc is None:
            if not gpus:
                raise UsageError(
                    f"No GPU is visible ({why_none}), so %%torchrun cannot start one rank per "
                    "GPU: give the number of ranks, e.g. %%torchrun -n 2 (CPU ranks with gloo)."
                )
            nproc = gpus
        if backend == "nccl" and nproc > gpus:
            seen = f"{gpus} GPU{'s' if gpus != 1 else ''} visible" + (
                f" ({why_none})" if why_none else ""
            )
            raise UsageError(
                f"-n {nproc} with nccl needs one GPU per rank, and there "
                f"{'is' if gpus == 1 else 'are'} {seen}. Use -n {gpus} or fewer, or "
                "--backend gloo for CPU ranks."
                if gpus
                else f"--backend nccl needs NVIDIA GPUs, and none is visible ({why_none}): "
                "use --backend gloo for CPU ranks."
            )
        try:
            limit = parse_size(args.max_result)
        except ValueError as err:
            raise UsageError(f"--max-result {err}") from None
        endpoint = None
        node_rank = args.node_rank
        try:
            if args.rdzv_endpoint is not None:
                endpoint = parse_endpoint(args.rdzv_endpoint)
            if args.nnodes > 1:
                if endpoint is None:
                    raise UsageError(
                        f"--nnodes {args.nnodes} needs --rdzv-endpoint HOST:PORT: an address of "
                        "node 0 that every machine can reach, the same on all of them."
                    )
                if node_rank is None:
                    raise UsageError(
                        f"--nnodes {args.nnodes} needs this machine's --node-rank: 0 on the "
                        f"machine at {endpoint}, 1 to {args.nnodes - 1} on the others."
                    )
            node_rank = node_rank or 0
            if not 0 <= node_rank < args.nnodes:
                raise UsageError(
                    f"--node-rank {node_rank} must be from 0 to {args.nnodes - 1} "
                    f"(--nnodes {args.nnodes})."
                )
            if endpoint is not None and node_rank == 0:
                check_host_endpoint(endpoint)
        except EndpointError as err:
            raise UsageError(str(err)) from None
        return LaunchSpec(
            nproc_per_node=nproc,
            backend=backend,
            timeout_s=args.timeout,
            nnodes=args.nnodes,
            node_rank=node_rank,
            endpoint=endpoint,
            env=env,
            result_limit_bytes=limit,
            color=not args.no_color and "NO_COLOR" not in os.environ,
        )
