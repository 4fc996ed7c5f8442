"""What runs inside each rank: the preamble of a ``%%torchrun`` cell, then the cell itself.

torchrun starts ``main.py`` of the run folder once per rank (see ``script.py``); that file calls
:func:`main`, which

1. sends the rank's stdout and stderr (file descriptors 1 and 2, so C++ and NCCL output too)
   to ``rank-<RANK>.log`` in the run folder, which the notebook streams with a rank prefix;
2. asks Linux to kill the rank if torchrun dies (no orphan keeps GPU memory), ends the rank
   itself when the kernel that ran the cell ends (even while torchrun is still shutting down),
   and dumps the rank's Python stack to ``rank-<RANK>.stack`` when torchrun stops it with
   SIGTERM (this is how a hang names the line a rank was stuck on);
3. initialises the process group with the cell's ``--timeout`` (torch's own collective timeout;
   NCCL's watchdog enforces it) and binds ``rank``, ``local_rank``, ``world_size`` and
   ``device`` in the cell's namespace;
4. runs the cell as ``__main__`` under torchelastic's ``@record`` (so torchrun's own error
   report names the failing rank too), and writes ``rank-<RANK>.error.json``: the exception
   with a traceback that starts at the cell, for the notebook to show.

Only the standard library is imported before the output is redirected.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import json
import linecache
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
import types
from pathlib import Path
from typing import Any, NoReturn

import psutil

from jupyter_gpu.distributed.process import die_with_parent
from jupyter_gpu.distributed.process_end import end_process
from jupyter_gpu.distributed.script import KERNEL_PID_ENV, RUN_DIR_ENV

CELL_FILENAME = "<torchrun cell>"

# Words in an exception that mark a collective or rendezvous that ran out of time: gloo says
# "Timed out waiting 5000ms", NCCL's watchdog "Watchdog caught collective operation timeout".
TIMEOUT_WORDS = ("timed out", "timeout", "time out")


def _redirect_output(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def die_with_kernel(kernel_pid: int) -> None:
    """End this rank, and its process group, as soon as the process ``kernel_pid`` ends.

    torchrun's parent-death signal already stops the ranks when a killed kernel takes torchrun
    with it, but torchrun then waits up to 30 s for its workers; a rank that watches the kernel
    itself is gone at once. The watch is a pidfd (Linux 5.3+), so a reused pid cannot fool it;
    without pidfds there is no watch and torchrun's own shutdown stays the only one.
    """
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return
    try:
        pidfd = pidfd_open(kernel_pid)
    except ProcessLookupError:
        _end_rank()  # the kernel is already gone
        return
    except OSError:
        return
    ended = select.poll()  # not select.select: that fails for a descriptor above 1023
    ended.register(pidfd, select.POLLIN)  # readable once the process has ended

    def watch() -> None:
        ended.poll()
        _end_rank()

    threading.Thread(target=watch, name="jupyter-gpu-kernel-watch", daemon=True).start()


def _end_rank() -> None:
    # torchrun starts each rank as a session leader: its process group holds the rank's own
    # children (DataLoader workers) too.
    if os.getpgrp() == os.getpid():
        with contextlib.suppress(OSError):
            os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def is_timeout(exc: BaseException) -> bool:
    """Whether an exception says that a collective or the rendezvous ran out of time."""
    if isinstance(exc, TimeoutError):
        return True
    text = f"{type(exc).__name__} {exc}".lower()
    return any(word in text for word in TIMEOUT_WORDS)


def _is_distributed(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"DistError", "DistBackendError", "DistNetworkError", "DistStoreError"}:
        return True
    text = str(exc)
    return any(word in text for word in ("NCCL", "Gloo", "gloo", "c10d", "ProcessGroup"))


def _cell_traceback(exc: BaseException) -> str:
    """The traceback from the cell's first frame on, without torch's innermost frames.

    The preamble's frames before the cell are noise; so are the frames inside torch below the
    cell's last line (``dist.all_reduce`` -> its logging wrapper -> ``work.wait()``): the
    cell's line and the message say what happened. Frames in the user's own modules stay.
    """
    tb = exc.__traceback__
    walker = tb
    while walker is not None and walker.tb_frame.f_code.co_filename != CELL_FILENAME:
        walker = walker.tb_next
    report = traceback.TracebackException(type(exc), exc, walker if walker is not None else tb)
    torch_dir = _torch_dir()
    frames = list(report.stack)
    keep = len(frames)
    while keep > 1 and torch_dir and frames[keep - 1].filename.startswith(torch_dir):
        keep -= 1
    hidden = len(frames) - keep
    if hidden:
        report.stack = traceback.StackSummary.from_list(frames[:keep])
    lines = list(report.format())
    if hidden:
        note = f"  ({hidden} frame{'s' if hidden > 1 else ''} inside torch not shown)\n"
        lines.insert(len(lines) - len(list(report.format_exception_only())), note)
    return "".join(lines)


def _torch_dir() -> str | None:
    torch = sys.modules.get("torch")
    path = getattr(torch, "__file__", None)
    return str(Path(path).parent) + os.sep if path else None


def _missing_name(exc: BaseException) -> str | None:
    if isinstance(exc, NameError):
        return getattr(exc, "name", None)
    return None


def _write_error(run_dir: Path, rank: int, exc: BaseException) -> None:
    record = {
        "rank": rank,
        "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "type": type(exc).__qualname__,
        "module": type(exc).__module__,
        "message": str(exc),
        "traceback": _cell_traceback(exc),
        "timestamp": time.time(),
        "timeout": is_timeout(exc),
        "distributed": _is_distributed(exc),
        "missing_name": _missing_name(exc),
    }
    # Whole or not at all (torchrun may kill this rank mid-write once another failed), and
    # without a rename over the name: only jupyter_gpu.compile_cache deletes (new_files).
    from jupyter_gpu.new_files import write_new

    folder = os.open(run_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        write_new(folder, f"rank-{rank}.error.json", json.dumps(record).encode())
    finally:
        os.close(folder)


def _init_process_group(config: dict[str, Any], local_rank: int) -> Any:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    timeout = timedelta(seconds=float(config["timeout_s"]))
    if config["backend"] == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        # device_id makes NCCL create its communicator now: a broken setup fails here, at
        # init, rather than at the first collective.
        dist.init_process_group("nccl", timeout=timeout, device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", timeout=timeout)
        # Gloo's init can return on one rank while another still connects its mesh: a rank whose
        # cell is quick then exits, and the slow one fails with "Connection closed by peer" (seen
        # in CI, with 2 CPU ranks on a loaded machine). Nobody starts the cell before all are in.
        dist.barrier()
    return device


def _run_cell(config: dict[str, Any], run_dir: Path, rank: int) -> None:
    import torch.distributed as dist

    local_rank = int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    source = Path(config["cell_path"]).read_text()
    code = compile(source, CELL_FILENAME, "exec")
    # Tracebacks and inspect.getsource() find the cell's lines, as IPython does for its cells.
    linecache.cache[CELL_FILENAME] = (len(source), None, source.splitlines(True), CELL_FILENAME)
    device = _init_process_group(config, local_rank)
    module = types.ModuleType("__main__")
    module.__dict__.update(
        {"rank": rank, "local_rank": local_rank, "world_size": world_size, "device": device}
    )
    sys.modules["__main__"] = module  # classes defined in the cell pickle as __main__.X
    exec(code, module.__dict__)  # noqa: S102  # running the user's cell is the point
    # The cell's objects go now, while the interpreter is whole: a DDP model's reducer or an
    # FSDP module keeps gloo work (tensors with Python references) that, freed only at
    # interpreter finalization, aborts the rank on its way out (pytorch/pytorch#179291 describes
    # the SIGABRT; seen here as "terminate called without an active exception" on two ranks of a
    # world of four in CI, after every rank had trained).
    module.__dict__.clear()
    gc.collect()
    if dist.is_initialized():
        # All ranks leave together: a rank that tore down its gloo pairs while another was still
        # in the cell's last collective aborted that one ("terminate called without an active
        # exception", then SIGABRT; seen in CI with FSDP on 2 CPU ranks of a loaded machine).
        dist.barrier()
        dist.destroy_process_group()


def main(config_path: str) -> NoReturn:
    """Run one rank of a ``%%torchrun`` cell (called by the generated ``main.py``), then end.

    The process ends with status 0, or 1 after a failure (reported in ``rank-N.error.json``).
    """
    config_file = Path(config_path)
    run_dir = config_file.parent
    config = json.loads(config_file.read_text())
    rank = int(os.environ["RANK"])
    _redirect_output(run_dir / f"rank-{rank}.log")
    die_with_parent(signal.SIGKILL)
    if KERNEL_PID_ENV in os.environ:
        die_with_kernel(int(os.environ[KERNEL_PID_ENV]))
    os.environ[RUN_DIR_ENV] = str(run_dir)
    started = {
        "rank": rank,
        "pid": os.getpid(),
        # With the pid, the process's identity: the stop button kills only this process at
        # that pid, never one that got the pid after this rank ended (process.py).
        "started_s": psutil.Process().create_time(),
        "host": socket.gethostname(),
        "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
    }
    (run_dir / f"rank-{rank}.json").write_text(json.dumps(started))
    stack = (run_dir / f"rank-{rank}.stack").open("w")  # kept open: faulthandler writes at exit
    faulthandler.register(signal.SIGTERM, file=stack, all_threads=False, chain=True)

    from torch.distributed.elastic.multiprocessing.errors import record

    def run() -> None:
        try:
            _run_cell(config, run_dir, rank)
        except SystemExit as exc:
            if exc.code not in (None, 0):
                _write_error(run_dir, rank, exc)
            raise
        except BaseException as exc:
            _write_error(run_dir, rank, exc)
            raise

    try:
        record(run)()
    except BaseException:  # noqa: BLE001  # reported in rank-N.error.json, shown once by the notebook
        end_process(1)
    # Not a normal exit: finalizing an interpreter that holds torch takes most of a second of
    # CPU, and torchrun's agent (and so the cell) waits for it (process_end.py).
    end_process(0)
