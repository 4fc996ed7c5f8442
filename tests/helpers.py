"""The tests' one set of helpers: a free port, waiting for a condition, a real Jupyter server,
a notebook's training step, variants that record their calls, torch's garbled trace.

Every test, benchmark and GPU check that needs one of these imports it from here (the GPU checks
and the benchmarks, run as scripts, put the repository root on ``sys.path`` first). Servers
listen on 127.0.0.1 only and need their token.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import importlib.util
import json
import os
import queue
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")

#: The extension the server loads unless told otherwise.
JUPYTER_GPU_ON = "{'jupyter_gpu': True}"

#: Server options for checks that wait on readings: a sample each half second, the kernels'
#: map (which notebook a GPU process belongs to) each second.
FAST_SAMPLING = ("--JupyterGpu.interval_s=0.5", "--JupyterGpu.kernel_map_interval_s=1")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, from below the kernel's ephemeral range.

    A port that ``bind(0)`` hands out comes from the range the kernel hands to every other
    ``bind(0)`` (a kernel's ports, another test's server) and every outgoing connection, so one of
    them could take it before the server it was meant for binds it: a JupyterHub's port was taken
    that way ("Address already in use", 8 hub tests errored in a full run of 2026-12-07; what took
    it was not seen). Below the range the kernel gives no port unasked; the pick is random, so that
    workers picking at the same moment seldom meet. The browser tests' fixed ports
    (ui-tests/servers.json) are below ``free_port_range()``.
    """
    below = free_port_range()
    # SystemRandom: a test that seeds `random` must not make every worker pick the same ports.
    for port in random.SystemRandom().sample(below, min(100, len(below))):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # in use: another
                continue
            return port
    with socket.socket() as s:  # a hundred in use, or no range: what the kernel gives
        s.bind(("127.0.0.1", 0))
        given: int = s.getsockname()[1]
        return given


def free_port_range() -> range:
    """Where ``free_port`` picks: from 20000 (above the browser tests' fixed ports) up to the
    first port of the kernel's ephemeral range (Linux's file; else its default, 32768)."""
    try:
        start = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        start = 32768
    return range(20000, min(start, 32768))


def wait_for(
    check: Callable[[], T | None],
    what: str | Callable[[], str] = "the condition was not met",
    *,
    timeout_s: float = 10.0,
    poll_s: float = 0.02,
    retry_on: tuple[type[Exception], ...] = (),
    process: subprocess.Popen[Any] | None = None,
    log: Path | None = None,
) -> T:
    """``check()``'s first truthy result, asked every ``poll_s`` seconds.

    ``what`` says what did not happen (a function: called when the wait fails, to show the
    state then). ``retry_on``: exceptions that mean "not yet" (``OSError`` while a server
    starts: refused, or an HTTP error). ``process``: the wait fails at once if it exits.

    Raises:
        AssertionError: saying ``what`` (and ``log``'s text, if given) once ``timeout_s``
            passes or ``process`` exits.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            result = check()
        except retry_on:
            pass
        else:
            if result:
                return result
        _fail_if_over(what, deadline, timeout_s, process, log)
        time.sleep(poll_s)


def wait_until_execd(procs: Sequence[subprocess.Popen[Any]], *, timeout_s: float = 30.0) -> None:
    """Until each child (started with a list of arguments) runs its own program: before its
    ``exec``, a forked child's ``/proc`` entry (command line, environment) is its parent's.

    Raises:
        AssertionError: when one has not, ``timeout_s`` seconds on, or has exited.
    """
    import psutil

    def cmdline(pid: int) -> list[str]:
        try:
            return list(psutil.Process(pid).cmdline())
        except psutil.Error:
            return []

    for proc in procs:
        wanted = [str(a) for a in proc.args]
        wait_for(
            functools.partial(lambda pid, wanted: cmdline(pid) == wanted, proc.pid, wanted),
            f"process {proc.pid} never ran {wanted}",
            timeout_s=timeout_s,
            process=proc,
        )


async def wait_for_async(
    check: Callable[[], Awaitable[T | None]],
    what: str | Callable[[], str] = "the condition was not met",
    *,
    timeout_s: float = 30.0,
    poll_s: float = 0.2,
    retry_on: tuple[type[Exception], ...] = (),
    process: subprocess.Popen[Any] | None = None,
) -> T:
    """As :func:`wait_for`, for a check that is awaited (on the caller's event loop)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            result = await check()
        except retry_on:
            pass
        else:
            if result:
                return result
        _fail_if_over(what, deadline, timeout_s, process, None)
        await asyncio.sleep(poll_s)


def _fail_if_over(
    what: str | Callable[[], str],
    deadline: float,
    timeout_s: float,
    process: subprocess.Popen[Any] | None,
    log: Path | None,
) -> None:
    """Raise ``AssertionError`` (saying ``what``, then ``log``) if the wait is over."""
    if process is not None and process.poll() is not None:
        why = f"the process exited ({process.returncode})"
    elif time.monotonic() >= deadline:
        why = f"after {timeout_s:g} s"
    else:
        return
    said = f"{what if isinstance(what, str) else what()} ({why})"
    if log is not None:
        with contextlib.suppress(OSError):
            said += "\n" + log.read_text(errors="replace")
    raise AssertionError(said)


def start_server(
    *,
    port: int,
    root: Path,
    token: str,
    log: Path,
    options: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    extensions: str = JUPYTER_GPU_ON,
    prefix: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """``python -m jupyter_server`` with ``extensions`` on, its output (both streams) in ``log``.

    ``options`` are more command-line options (``--JupyterGpu.backend=simulated``, ...);
    ``extensions`` the ``jpserver_extensions`` dict, as Python source; ``prefix`` a command
    that runs the server (``unshare --pid ...``).
    """
    argv = [
        *prefix,
        sys.executable,
        "-m",
        "jupyter_server",
        "--no-browser",
        "--allow-root",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.root_dir={root}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.jpserver_extensions={extensions}",
        *options,
    ]
    with log.open("w") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)


def wait_until_up(
    fetch: Callable[[], T],
    server: subprocess.Popen[bytes],
    log: Path,
    *,
    timeout_s: float,
    poll_s: float,
) -> T:
    """``fetch()``'s result once it stops raising ``OSError`` (refused, or an HTTP error).

    Raises:
        AssertionError: with the server's log, if the server exits or ``timeout_s`` passes.
    """
    return wait_for(
        fetch,
        "the server did not come up",
        timeout_s=timeout_s,
        poll_s=poll_s,
        retry_on=(OSError,),
        process=server,
        log=log,
    )


def fetch_json(
    url: str, method: str = "GET", body: dict[str, Any] | None = None, *, token: str
) -> Any:
    """``method`` on a server's ``url`` with its ``token``: the JSON answer (``None`` if empty).

    Raises:
        OSError: refused, or an HTTP error status (``urllib.error.HTTPError``).
    """
    request = urllib.request.Request(
        url,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        raw = response.read()
        return json.loads(raw) if raw else None


def notebook_kernel(base: str, notebook: str, runtime: Path, *, token: str) -> tuple[str, Any]:
    """A session for ``notebook`` on the server at ``base``: its kernel id and a ready client.

    ``runtime`` is the server's ``JUPYTER_RUNTIME_DIR`` (the kernel's connection file is there).
    The client is a ``jupyter_client.BlockingKernelClient``; the caller stops its channels.
    """
    from jupyter_client import BlockingKernelClient

    session = fetch_json(
        f"{base}/api/sessions",
        "POST",
        {"path": notebook, "type": "notebook", "kernel": {"name": "python3"}},
        token=token,
    )
    kernel_id: str = session["kernel"]["id"]
    client = BlockingKernelClient(connection_file=str(runtime / f"kernel-{kernel_id}.json"))
    client.load_connection_file()
    client.start_channels()
    # Not client.wait_for_ready(): a client without a kernel manager knows the kernel is alive
    # only by its heartbeat, and wait_for_ready gives up ("Kernel died before replying to
    # kernel_info") when no beat answers within a second, which a kernel still importing on a
    # loaded machine cannot do (two GPU checks failed so on the H200 beside the test suite).
    # The shell socket queues a request until the kernel listens, so its reply says the kernel
    # is up; the kernel also publishes a status for each request, and only once one of those
    # reaches us is our IOPub subscription in place (a PUB socket drops what it sends before a
    # subscriber has joined): ask again until both have come.
    deadline = time.monotonic() + 120
    while True:
        asked = client.kernel_info()
        while client.get_shell_msg(timeout=_left(deadline))["parent_header"].get("msg_id") != asked:
            pass
        with contextlib.suppress(queue.Empty):
            while True:
                status = client.get_iopub_msg(timeout=min(1.0, _left(deadline)))
                if status["parent_header"].get("msg_id") == asked:
                    return kernel_id, client
        if time.monotonic() >= deadline:
            raise AssertionError(f"kernel {kernel_id}: no IOPub message in 120 s")


def _left(deadline: float) -> float:
    """Seconds until ``deadline``, at least a tenth (a timeout of 0 would never wait)."""
    return max(0.1, deadline - time.monotonic())


def stop_server(server: subprocess.Popen[bytes], timeout_s: float) -> int:
    """SIGTERM, as a process manager stops it; the exit code (-9: killed after ``timeout_s``)."""
    server.send_signal(signal.SIGTERM)
    try:
        return server.wait(timeout_s)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
        return -9


#: The repository's root: on ``PYTHONPATH`` for servers, kernels and ranks started from a test.
ROOT = Path(__file__).resolve().parents[1]


def load_script(path: Path) -> ModuleType:
    """The script at ``path`` (``benchmarks/gpt_step.py``, ...) imported as a module, by its stem.

    It goes in ``sys.modules`` before it runs, as an import would put it (code that looks its
    own module up there, as dataclasses do, works as when imported).
    """
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def train_step_cell(loss: str, *, zero_grad: str = "") -> str:
    """A cell's ``def train_step()``, as most training loops write it: ``opt.zero_grad``
    (``zero_grad``: its arguments), ``loss`` (an expression over the cell's names), backward,
    ``opt.step()``, the loss returned. The cell around it defines ``model``, ``opt`` and data."""
    return (
        "def train_step():\n"
        f"    opt.zero_grad({zero_grad})\n"
        f"    loss = {loss}\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    return loss\n"
    )


def recording_variants(*names: str) -> tuple[list[str], dict[str, Callable[[], None]]]:
    """Variants for a timer, each of which appends its name to the list returned with them:
    the order in which the timer called them."""
    order: list[str] = []
    return order, {name: functools.partial(order.append, name) for name in names}


def garble_when_recording_stops(monkeypatch: Any) -> None:
    """Make torch's profiler raise as torch 2.13 does, now and then, when its recording stops.

    The ``prof.step()`` that ends the recorded steps reads the trace back, and a garbled event
    name there raised ``UnicodeDecodeError`` (6 of 20 runs of ``%%profile --stack``'s places
    test alone, 2026-12-08). ``monkeypatch``: pytest's.
    """
    import torch
    from torch.profiler import ProfilerAction

    step = torch.profiler.profile.step

    def garbled(self: torch.profiler.profile) -> None:
        recording = self.current_action == ProfilerAction.RECORD_AND_SAVE
        step(self)
        if recording and self.current_action != ProfilerAction.RECORD_AND_SAVE:
            raise UnicodeDecodeError("utf-8", b"\xe5", 0, 1, "invalid continuation byte")

    monkeypatch.setattr(torch.profiler.profile, "step", garbled)


def repo_env(**extra: str) -> dict[str, str]:
    """This process's environment with the repository first on ``PYTHONPATH``, and ``extra``.

    On the GPU machine the package is not installed: a server's kernels import it from here.
    """
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, **extra}


@dataclasses.dataclass
class RunningServer:
    """A Jupyter server that :func:`running_server` started and found answering."""

    process: subprocess.Popen[bytes]
    #: ``http://127.0.0.1:<port>``, without the base URL.
    origin: str
    token: str
    #: Its ``JUPYTER_RUNTIME_DIR``: kernels' connection files (for :func:`notebook_kernel`).
    runtime: Path
    log: Path
    #: What the readiness request answered first.
    first_answer: Any
    #: The server's exit code once it is stopped (-9: killed after the stop timeout).
    exit_code: int | None = None
    clients: list[Any] = dataclasses.field(default_factory=list)

    def api(self, path: str = "") -> str:
        """The URL of ``path`` under jupyter-gpu's REST API."""
        return f"{self.origin}/jupyter-gpu/api/v1/{path}".rstrip("/")

    def kernel(self, notebook: str) -> tuple[str, Any]:
        """A kernel for ``notebook`` (see :func:`notebook_kernel`); its client stops with us."""
        kernel_id, client = notebook_kernel(self.origin, notebook, self.runtime, token=self.token)
        self.clients.append(client)
        return kernel_id, client


@contextlib.contextmanager
def running_server(
    root: Path,
    *,
    token: str,
    log: Path,
    options: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    prefix: Sequence[str] = (),
    ready: str = "jupyter-gpu/api/v1/devices",
    timeout_s: float = 60,
    poll_s: float = 0.5,
    stop_timeout_s: float = 30,
) -> Iterator[RunningServer]:
    """A server on a free port (see :func:`start_server`), stopped (SIGTERM) when the block ends.

    It is up once ``GET <ready>`` answers. ``env`` goes on top of :func:`repo_env`, with
    ``JUPYTER_RUNTIME_DIR`` set to ``root/runtime``. The clients of kernels opened through
    :meth:`RunningServer.kernel` are stopped first.
    """
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    runtime = root / "runtime"
    log.parent.mkdir(parents=True, exist_ok=True)
    process = start_server(
        port=port,
        root=root,
        token=token,
        log=log,
        options=options,
        env=repo_env(JUPYTER_RUNTIME_DIR=str(runtime), **(env or {})),
        prefix=prefix,
    )
    server = None
    try:
        first = wait_until_up(
            lambda: fetch_json(f"{origin}/{ready}", token=token),
            process,
            log,
            timeout_s=timeout_s,
            poll_s=poll_s,
        )
        server = RunningServer(process, origin, token, runtime, log, first)
        yield server
    finally:
        for client in server.clients if server is not None else ():
            client.stop_channels()
        code = stop_server(process, timeout_s=stop_timeout_s)
        if server is not None:
            server.exit_code = code
