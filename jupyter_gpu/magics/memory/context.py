"""The GPU memory of a bare CUDA context on one GPU, measured once per kernel in a fresh process.

What NVML counts for a process and torch's allocator does not (``%memsummary``'s gap) starts
with the CUDA context, whose size depends on the GPU, the driver and the settings the process
inherits (``CUDA_MODULE_LOADING``, which torch sets to ``LAZY`` when unset). No API reports a
context's size, and this kernel's own context was made before anyone could read around it. So a
fresh Python process (the standard library only, no torch) opens the GPU's primary context
through the driver API, holds it, and NVML reads that process's memory, the same reading
``%memsummary`` takes of this kernel. It costs a process start and a context's creation, once
per GPU: the result is kept for the kernel's life, a failure too (with its reason).
"""

from __future__ import annotations

import contextlib
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import IO

from jupyter_gpu.magics.probes.allocator import match_nvml_device, torch_uuid

START_DEADLINE_S = 20.0
"""How long the probe may take to open its context (``cuInit`` alone can take seconds)."""

NVML_DEADLINE_S = 3.0
"""How long NVML may take to list the probe's process once it holds its context."""

# Run with ``python -I -c PROBE <uuid hex>``: prints "ready" once it holds the context of the GPU
# with that UUID, or "error <why>", then holds the context until its stdin closes.
# cuDeviceGetUuid_v2 (CUDA 11.4+) gives MIG instances their own UUID, as the runtime (and so
# torch's device properties) does.
PROBE = r"""
import ctypes, sys

def probe(wanted):
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return f"no CUDA driver library here ({exc})"

    def call(name, *args):
        rc = getattr(cuda, name)(*args)
        if rc:
            text = ctypes.c_char_p()
            cuda.cuGetErrorName(rc, ctypes.byref(text))
            raise RuntimeError(f"{name}: {(text.value or b'error %d' % rc).decode()}")

    get_uuid = "cuDeviceGetUuid_v2" if hasattr(cuda, "cuDeviceGetUuid_v2") else "cuDeviceGetUuid"
    try:
        call("cuInit", 0)
        count = ctypes.c_int()
        call("cuDeviceGetCount", ctypes.byref(count))
        for ordinal in range(count.value):
            device = ctypes.c_int()
            call("cuDeviceGet", ctypes.byref(device), ordinal)
            uuid = (ctypes.c_ubyte * 16)()
            call(get_uuid, uuid, device)
            if bytes(uuid).hex() == wanted:
                break
        else:
            return "the driver lists no GPU with this one's UUID in the probe"
        context = ctypes.c_void_p()
        call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
        call("cuCtxSetCurrent", context)
    except (AttributeError, RuntimeError) as exc:
        return str(exc)
    return None

error = probe(sys.argv[1])
print("ready" if error is None else f"error {error}", flush=True)
if error is None:
    sys.stdin.readline()
"""


@dataclass(frozen=True)
class ContextFootprint:
    """A bare CUDA context's GPU memory on one GPU (bytes, as NVML counts a process), or why not.

    ``used_bytes`` is ``None`` when it was not measured; ``reason`` then says why.
    """

    used_bytes: int | None
    reason: str | None


_measured: dict[str, ContextFootprint] = {}


def context_footprint(index: int) -> ContextFootprint:
    """The bare context's footprint on torch's CUDA device ``index``, measured on first use.

    Never raises: a GPU whose UUID torch cannot give, a driver library that will not load, a
    GPU that refuses a second context (exclusive-process mode, or full), or NVML not listing
    the probe's process (a container's own PID namespace) gives a ``reason`` instead.
    """
    uuid = torch_uuid(index)
    if uuid is None:
        return ContextFootprint(None, "torch gives no UUID for this GPU to find it by")
    if uuid not in _measured:
        _measured[uuid] = _measure(index, uuid.replace("-", ""))
    return _measured[uuid]


def _measure(index: int, uuid_hex: str) -> ContextFootprint:
    try:
        child = subprocess.Popen(  # noqa: S603 (this interpreter, our own probe, no shell)
            [sys.executable, "-I", "-c", PROBE, uuid_hex],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
    except OSError as exc:
        return ContextFootprint(None, f"the probe process did not start ({exc})")
    try:
        assert child.stdout is not None  # stdout=PIPE above
        line = _line_within(child.stdout, START_DEADLINE_S)
        if line is None:
            return ContextFootprint(
                None, f"the probe did not open a context within {START_DEADLINE_S:g} s"
            )
        if line.strip() != "ready":
            why = line.strip().removeprefix("error ").strip()
            return ContextFootprint(None, why or "the probe process ended without a word")
        return _nvml_reading(index, child.pid)
    finally:
        _end(child)


def _line_within(stream: IO[str], timeout_s: float) -> str | None:
    """The next line of ``stream`` ("" at its end), or ``None`` if none came in ``timeout_s``."""
    readable, _, _ = select.select([stream], [], [], timeout_s)
    return stream.readline() if readable else None


def _nvml_reading(index: int, pid: int) -> ContextFootprint:
    """What NVML lists for process ``pid`` on the GPU, read until it is listed or time is up."""
    from jupyter_gpu.sampling import read_once

    deadline = time.monotonic() + NVML_DEADLINE_S
    while True:
        match = match_nvml_device(read_once().devices, index)
        if match is None or match.state != "ok":
            return ContextFootprint(None, "NVML's reading of this GPU did not come back")
        listed = [p for p in match.processes if p.pid == pid]
        if listed:
            used = listed[0].used_mem_bytes
            why = None if used is not None else "NVML does not report per-process memory here"
            return ContextFootprint(used, why)
        # read_once itself takes about 0.1 s: this polls at that pace, up to the deadline.
        if time.monotonic() >= deadline:
            return ContextFootprint(
                None,
                f"NVML did not list the probe's process within {NVML_DEADLINE_S:g} s (in a "
                "container it may see other PIDs)",
            )


def _end(child: subprocess.Popen[str]) -> None:
    """Let the probe go (its stdin closes, it returns), or kill it if it does not."""
    with contextlib.suppress(OSError):
        if child.stdin is not None:
            child.stdin.close()
    try:
        child.wait(timeout=5)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
    if child.stdout is not None:
        child.stdout.close()
