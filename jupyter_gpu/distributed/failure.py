"""Why a ``%%torchrun`` cell failed, in the words of the rank that failed first.

After torchrun exits with an error, :func:`explain` reads what the ranks left in the run folder:

- ``rank-<N>.error.json``: an exception in rank N, with the traceback from the cell on;
- ``rank-<N>.json``: that rank started (its pid and host);
- ``rank-<N>.stack``: where rank N's Python was when torchrun stopped it (faulthandler);
- ``rank-<N>.log``: its output (an NCCL watchdog timeout or a crash leaves no exception);
- ``torchrun.log``: torchrun's own output (rendezvous errors, the exit code of each rank).

The first failure in time is the cause; the others usually follow from it (a peer that left
breaks the collective others wait in). A timeout names the ranks that did not arrive: those that
were running something else when the others gave up, with the line each was on.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from jupyter_gpu.distributed.rank_main import CELL_FILENAME

# The environment that decides how NCCL and torch.distributed behave, each with a hint.
ENV_HINTS: dict[str, str] = {
    "NCCL_DEBUG": "INFO prints which transport NCCL picked (NVLink, PCIe P2P, SHM, sockets, "
    "IB) and why a connection failed: --env NCCL_DEBUG=INFO",
    "NCCL_P2P_DISABLE": "1 turns off direct GPU-to-GPU copies (NVLink or PCIe P2P): slower, but "
    "a workaround when P2P hangs (VMs, IOMMU, some PCIe switches)",
    "NCCL_P2P_LEVEL": "how far apart two GPUs may be for P2P (NVL, PIX, PXB, PHB, SYS); "
    "%gpu --topology shows the paths",
    "NCCL_SHM_DISABLE": "1 turns off shared-memory transfers between ranks of one machine; in "
    "containers a small /dev/shm breaks them (docker --shm-size)",
    "NCCL_IB_DISABLE": "1 turns off InfiniBand/RoCE: use it when nodes have no working IB, "
    "traffic then goes over TCP sockets",
    "NCCL_SOCKET_IFNAME": "the network interface NCCL uses between nodes (e.g. eth0, ^docker0,lo); "
    "a wrong one picks an address the other nodes cannot reach",
    "NCCL_NVLS_ENABLE": "0 turns off NVLink SHARP (multicast) collectives",
    "CUDA_VISIBLE_DEVICES": "the GPUs the ranks see; local rank i uses the i-th of them, so list "
    "at least as many as --nproc-per-node",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "what the NCCL watchdog does after a timeout or error "
    "(3, the default: tear the process down, so a hung rank cannot hang forever)",
    "TORCH_NCCL_BLOCKING_WAIT": "1 makes wait() raise the timeout in Python instead of the "
    "watchdog ending the process",
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "how long the watchdog's own monitor waits before it "
    "kills a rank whose watchdog is stuck",
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "1 writes the flight recorder (the last collectives of each "
    "rank) on a timeout; needs TORCH_NCCL_TRACE_BUFFER_SIZE",
    "TORCH_NCCL_TRACE_BUFFER_SIZE": "how many recent collectives the flight recorder keeps "
    "(e.g. 2000)",
    "TORCH_DISTRIBUTED_DEBUG": "DETAIL checks that all ranks call the same collectives with the "
    "same shapes, and names the rank that differs (slower)",
    "GLOO_SOCKET_IFNAME": "the network interface gloo uses between nodes",
}

_EXITCODE = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)")
_STACK_LINE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
# torch.distributed's message for an init_process_group after ours (distributed_c10d.py).
_SECOND_INIT = "trying to initialize the default process group twice"
_WATCHDOG = re.compile(r"Watchdog caught collective operation timeout: (WorkNCCL\([^)]*\))")


@dataclass(frozen=True)
class RankError:
    """The exception one rank raised (from ``rank-<N>.error.json``)."""

    rank: int
    host: str
    type: str
    message: str
    traceback: str
    timestamp: float
    timeout: bool
    distributed: bool
    missing_name: str | None = None


@dataclass
class Diagnosis:
    """What went wrong, for people: a headline, the cause's traceback, notes, the environment."""

    headline: str
    traceback: str = ""
    notes: list[str] = field(default_factory=list)
    show_environment: bool = False
    cause: RankError | None = None
    timed_out: bool = False
    missing_ranks: list[int] = field(default_factory=list)


def read_errors(run_dir: Path) -> list[RankError]:
    """Every rank's exception, earliest first."""
    errors = []
    for path in run_dir.glob("rank-*.error.json"):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        errors.append(
            RankError(
                rank=int(data["rank"]),
                host=str(data.get("host", "")),
                type=str(data["type"]),
                message=str(data["message"]),
                traceback=str(data["traceback"]),
                timestamp=float(data["timestamp"]),
                timeout=bool(data.get("timeout")),
                distributed=bool(data.get("distributed")),
                missing_name=data.get("missing_name"),
            )
        )
    return sorted(errors, key=lambda e: e.timestamp)


def started_ranks(run_dir: Path) -> dict[int, dict[str, object]]:
    """``{rank: {"pid", "host", "local_rank"}}`` of the ranks that started on this node."""
    out: dict[int, dict[str, object]] = {}
    for path in run_dir.glob("rank-*.json"):
        if path.name.endswith(".error.json"):
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):  # being written
            continue
        out[int(data["rank"])] = data
    return out


def stuck_at(run_dir: Path, rank: int, cell_lines: list[str]) -> str | None:
    """``cell line 7 (time.sleep(600))``: the line rank ``rank`` was on when it was stopped."""
    try:
        dump = (run_dir / f"rank-{rank}.stack").read_text()
    except OSError:
        return None
    for match in _STACK_LINE.finditer(dump):  # innermost frame first
        if match["file"] == CELL_FILENAME:
            number = int(match["line"])
            code = cell_lines[number - 1].strip() if 0 < number <= len(cell_lines) else ""
            code = code.split("  #", 1)[0].rstrip()  # the code, not its comment
            return f"cell line {number} ({code})" if code else f"cell line {number}"
    for match in _STACK_LINE.finditer(dump):
        return f"{match['file']}, line {match['line']} in {match['func']}"
    return None


def _rank_log(run_dir: Path, rank: int) -> str:
    try:
        return (run_dir / f"rank-{rank}.log").read_text(errors="replace")
    except OSError:
        return ""


def _exit_codes(torchrun_log: str) -> dict[int, int]:
    return {int(r): int(code) for r, code in _EXITCODE.findall(torchrun_log)}


def _describe_exit(code: int) -> str:
    if code >= 0:
        return f"exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    why = {
        "SIGKILL": " (killed: often the out-of-memory killer; check host memory)",
        "SIGSEGV": " (a crash in native code)",
        "SIGABRT": " (aborted: NCCL's watchdog does this after a timeout or an error)",
        "SIGBUS": " (often a full /dev/shm: give the container more shared memory)",
    }.get(name, "")
    return f"was ended by {name}{why}"


def _last_lines(text: str, n: int) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(lines[-n:])


def explain(
    run_dir: Path,
    *,
    world_size: int,
    timeout_s: float,
    cell_source: str,
    torchrun_log: str,
    notebook_names: frozenset[str] = frozenset(),
) -> Diagnosis:
    """Work out why the run in ``run_dir`` failed.

    Args:
        run_dir: the run folder.
        world_size: ranks in the job (all nodes).
        timeout_s: the cell's ``--timeout``.
        cell_source: the cell (to quote the line a rank was stuck on).
        torchrun_log: torchrun's own output.
        notebook_names: the notebook's variable names (a ``NameError`` for one of them gets a
            hint about sharing code with the ranks).
    """
    cell_lines = cell_source.splitlines()
    errors = read_errors(run_dir)
    started = started_ranks(run_dir)
    watchdog = {
        r: m.group(1) for r in started if (m := _WATCHDOG.search(_rank_log(run_dir, r))) is not None
    }
    timeouts = [e for e in errors if e.timeout]
    if timeouts or watchdog:
        waited = sorted({e.rank for e in timeouts} | set(watchdog))
        missing = [r for r in sorted(started) if r not in waited]
        diag = Diagnosis(
            headline=(
                f"a collective did not complete within --timeout {timeout_s:g} s: "
                + _ranks_text(waited)
                + " waited"
                + (f", {_ranks_text(missing)} did not arrive" if missing else "")
            ),
            show_environment=True,
            timed_out=True,
            missing_ranks=missing,
        )
        for r in missing:
            at = stuck_at(run_dir, r, cell_lines)
            diag.notes.append(
                f"rank {r} was busy elsewhere: at {at} when it was stopped"
                if at
                else f"rank {r} never reached the collective"
            )
        if not missing:
            diag.notes.append(
                "the ranks that did not arrive run on another node: look at its notebook"
                if len(started) < world_size
                else "every rank waited: they called different collectives, or in a different "
                "order (TORCH_DISTRIBUTED_DEBUG=DETAIL names the rank that differs)"
            )
        if timeouts:
            diag.cause = timeouts[0]
            diag.traceback = timeouts[0].traceback
        for r, work in watchdog.items():
            diag.notes.append(f"rank {r}: NCCL's watchdog ended {work}")
        diag.notes.append(
            "a rank that never arrives is usually one that took another branch (if rank == 0:"
            " ...), raised, or is still computing; raise --timeout if it only needs longer"
        )
        return diag
    if errors:
        cause = errors[0]
        diag = Diagnosis(
            headline=f"rank {cause.rank}{_host(cause, started)} raised {cause.type}",
            traceback=cause.traceback,
            cause=cause,
            show_environment=cause.distributed,
        )
        if cause.missing_name:
            in_notebook = cause.missing_name in notebook_names
            diag.notes.append(
                (
                    f"{cause.missing_name} is defined in the notebook, but the ranks are fresh "
                    "processes: they do not see the notebook's variables."
                    if in_notebook
                    else "the ranks are fresh processes: they see only what the cell defines "
                    "or imports."
                )
                + " Define it in this cell, or put shared code in a module (%%writefile "
                "helpers.py in a cell above, then import helpers here)."
            )
        if cause.type == "ValueError" and _SECOND_INIT in cause.message:
            diag.notes.append(
                "%%torchrun initialises the default process group before the cell runs (nccl "
                "with the rank's GPU, else gloo), so the cell's dist.init_process_group was a "
                "second one: leave it out, or guard it (if not dist.is_initialized(): ...) to "
                "keep the code runnable as a script. The cell has rank, local_rank, world_size "
                "and device already; a dist.destroy_process_group() at its end may stay."
            )
        same = [e.rank for e in errors[1:] if (e.type, e.message) == (cause.type, cause.message)]
        if same:
            diag.notes.append(f"{_ranks_text(same)} raised the same error")
        for other in errors[1:]:
            if other.rank in same:
                continue
            first = other.message.strip().splitlines()[0] if other.message.strip() else ""
            diag.notes.append(f"then rank {other.rank} failed too: {other.type}: {first[:160]}")
        # A rank that raised nothing but left a stack was stopped by torchrun once the first
        # failed (on a busy machine before it reached the same line): say where it was.
        raised = {e.rank for e in errors}
        for r in sorted(set(started) - raised):
            at = stuck_at(run_dir, r, cell_lines)
            if at is not None:
                diag.notes.append(f"rank {r} was stopped when rank {cause.rank} failed, at {at}")
        return diag
    codes = _exit_codes(torchrun_log)
    if codes:
        rank, code = min(codes.items())
        diag = Diagnosis(headline=f"rank {rank} {_describe_exit(code)}", show_environment=True)
        tail = _last_lines(_rank_log(run_dir, rank), 15)
        if tail:
            diag.traceback = f"last output of rank {rank}:\n{tail}"
        return diag
    diag = Diagnosis(
        headline="torchrun failed" + ("" if started else " before any rank started"),
        traceback=f"torchrun's output:\n{_last_lines(torchrun_log, 20)}",
        show_environment=True,
    )
    if "RendezvousTimeoutError" in torchrun_log:
        diag.notes.append(
            f"not every node joined within --timeout {timeout_s:g} s: start the same cell on "
            "each machine, with the same --nnodes and --rdzv-endpoint"
        )
    elif "RendezvousConnectionError" in torchrun_log:
        diag.notes.append(
            "this node could not reach the rendezvous: is node 0's cell running, and is its "
            "--rdzv-endpoint address reachable from here (firewall, the right interface)?"
        )
    return diag


def _host(error: RankError, started: Mapping[int, Mapping[str, object]]) -> str:
    hosts = {str(info.get("host")) for info in started.values()}
    return f" on {error.host}" if len(hosts) > 1 or error.rank not in started else ""


def _ranks_text(ranks: list[int]) -> str:
    if not ranks:
        return "no rank"
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    return "ranks " + ", ".join(str(r) for r in ranks)


_GLOO_VARIABLES = ("GLOO_SOCKET_IFNAME", "TORCH_DISTRIBUTED_DEBUG", "CUDA_VISIBLE_DEVICES")


def environment_report(env: Mapping[str, str], backend: str) -> list[tuple[str, str, str]]:
    """``(name, value or "not set", hint)`` of the variables that matter to ``backend``.

    For nccl: every variable of :data:`ENV_HINTS`, then any other ``NCCL_*`` or
    ``TORCH_NCCL_*`` variable that is set. For gloo (CPU ranks) only the few it reads.
    """
    names = list(ENV_HINTS) if backend == "nccl" else list(_GLOO_VARIABLES)
    rows = [(name, env.get(name, "not set"), ENV_HINTS[name]) for name in names]
    if backend == "nccl":
        for name in sorted(env):
            if name.startswith(("NCCL_", "TORCH_NCCL_")) and name not in ENV_HINTS:
                rows.append((name, env[name], ""))
    return rows
