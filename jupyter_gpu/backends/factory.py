"""Open the backend the configuration asks for; ``auto`` falls back to no GPU, with a reason."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

from jupyter_gpu.readings.backend import Backend, NoGpuBackend
from jupyter_gpu.readings.deadline import READ_DEADLINE_S
from jupyter_gpu.simulated.backend import SimulatedBackend
from jupyter_gpu.simulated.faults import SimulatedFault, start_up_hang_s

BackendChoice = Literal["auto", "nvml", "simulated", "none"]
BACKEND_CHOICES: tuple[BackendChoice, ...] = ("auto", "nvml", "simulated", "none")


def open_backend(
    choice: str = "auto",
    *,
    simulated_devices: int = 2,
    pids: Callable[[], Sequence[int]] | None = None,
    simulated_faults: Sequence[SimulatedFault] = (),
    simulated_epoch: float | None = None,
    nvml: Any = None,
    log: logging.Logger | None = None,
    deadline_s: float = READ_DEADLINE_S,
    stop: threading.Event | None = None,
) -> Backend:
    """Open a backend. Never raises for a missing GPU: that is a ``NoGpuBackend`` with a reason.

    Args:
        choice: ``auto`` (NVML if it works, else no GPU; never simulated), ``nvml`` (the same,
            but a failure is logged as a warning), ``simulated`` or ``none``.
        simulated_devices: how many simulated devices (1 to 16).
        pids: for the simulated backend, pids to show as GPU processes.
        simulated_faults: for the simulated backend, faults to show (``faults.py``); a
            start-up hang (``hang:init``) makes this call block until it ends, as a hung
            ``nvmlInit`` would, or until ``stop`` is set.
        simulated_epoch: for the simulated backend, the Unix time its jobs' timeline started
            (a kernel passes its server's, ``reasons.simulated_epoch_from_env``); default now.
        nvml: an object with pynvml's interface to use instead of ``pynvml`` (tests inject a
            fake NVML here).
        log: where to say which backend was chosen and why.
        deadline_s: for NVML, how long a call on a GPU may be out before that GPU is not
            responding (opening included: ``NvmlBackend``).
        stop: ends a simulated start-up hang early (the server is stopping). A real NVML call
            cannot be ended: the caller runs this in a thread it can leave (``startup.py``).

    Raises:
        ValueError: for an unknown ``choice``, or simulated options out of bounds.
    """
    log = log or logging.getLogger("jupyter_gpu")
    if choice not in BACKEND_CHOICES:
        raise ValueError(f"backend must be one of {', '.join(BACKEND_CHOICES)}; got {choice!r}")
    if choice == "simulated":
        elapsed_s = 0.0 if simulated_epoch is None else max(0.0, time.time() - simulated_epoch)
        hang_s = start_up_hang_s(simulated_faults, elapsed_s)
        if hang_s is not None:
            log.info("jupyter_gpu: simulated fault: the start-up hangs (hang:init)")
            began = time.monotonic()
            (stop or threading.Event()).wait(None if math.isinf(hang_s) else hang_s)
            elapsed_s += time.monotonic() - began  # the jobs' timeline ran on meanwhile
        return SimulatedBackend(
            simulated_devices, pids=pids, faults=simulated_faults, elapsed_s=elapsed_s
        )
    if choice == "none":
        return NoGpuBackend("GPU monitoring is switched off (backend 'none')")
    from jupyter_gpu.nvml.backend import NvmlBackend, NvmlUnavailable

    try:
        return NvmlBackend(nvml=nvml, log=log, deadline_s=deadline_s)
    except NvmlUnavailable as err:
        level = logging.WARNING if choice == "nvml" else logging.INFO
        log.log(level, "jupyter_gpu: no GPU to monitor: %s", err.reason)
        return NoGpuBackend(err.reason)
