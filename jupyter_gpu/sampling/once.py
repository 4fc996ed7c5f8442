"""``read_once``: one reading of the GPUs and the host, now, behind the per-GPU deadline.

For ``%gpu`` and ``%memsummary``, in the kernel. Each GPU is read in its own thread (the
windows of its windowed groups opened, such as GPM; its fast readings and its other groups
read; the windows closed): a GPU that has not answered
within ``deadline_s`` is reported as not responding, by its index, and the others are read as
usual. Opening NVML has the same deadline per GPU (``NvmlBackend``), and the whole open twice
that, so a hung GPU, or a hung driver, never hangs the kernel.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

from jupyter_gpu.backends.factory import open_backend
from jupyter_gpu.backends.reasons import simulated_devices_from_env, simulated_epoch_from_env
from jupyter_gpu.compile_cache import scan_caches
from jupyter_gpu.host.reader import HostReader
from jupyter_gpu.readings import catalog
from jupyter_gpu.readings.backend import Backend, NoGpuBackend
from jupyter_gpu.readings.deadline import (
    READ_DEADLINE_S,
    READ_NOTHING,
    DeadlineReader,
    FastReading,
    Timed,
    not_responding,
)
from jupyter_gpu.readings.records import NOT_SCANNED, DeviceSample, GroupReading, Sample
from jupyter_gpu.readings.startup import NVML_START, NotAnswered, call_within
from jupyter_gpu.readings.topology import Topology
from jupyter_gpu.sampling.attribution import (
    ProcessAnnotator,
    default_root_pid,
    kernel_pids_of_server,
)
from jupyter_gpu.sampling.freshness import StaleAfter, merge_readings

CPU_WINDOW_S = 0.1
"""The window over which host CPU % and the GPM metrics are measured."""

NOT_ANSWERED_MESSAGE = (
    "GPU {index} did not answer within {deadline:g} s: an NVML call on it has been out for "
    "{stale:.0f} s (the driver or the GPU stopped responding)"
)

_log = logging.getLogger("jupyter_gpu")


@dataclass(frozen=True, slots=True)
class _Reading:
    """One GPU's readings of each group, each with the monotonic time it was taken."""

    fast: Timed[GroupReading]
    others: dict[str, Timed[GroupReading]]


def _read_gpu(
    backend: Backend, index: int, groups: tuple[catalog.Group, ...], window_end: float
) -> _Reading:
    """GPU ``index``'s readings of ``groups``: the windowed ones over the window to ``window_end``.

    ``groups`` holds the tick group (``fast``).
    """
    windowed = [g for g in groups if g.windowed]
    for group in windowed:
        backend.read_group(group.name, index)  # opens this GPU's window of the group
    tick = next(g for g in groups if g.tick)
    reading = backend.read_group(tick.name, index)
    fast = Timed(reading or READ_NOTHING, time.monotonic())
    others: dict[str, Timed[GroupReading]] = {}
    for group in groups:
        if group.tick or group.windowed:
            continue
        if (reading := backend.read_group(group.name, index)) is not None:
            others[group.name] = Timed(reading, time.monotonic())
    time.sleep(max(0.0, window_end - time.monotonic()))
    for group in windowed:
        if (reading := backend.read_group(group.name, index)) is not None:
            others[group.name] = Timed(reading, time.monotonic())
    return _Reading(fast, others)


def _open_within(choice: str, deadline_s: float) -> Backend:
    """``open_backend(choice)`` behind a deadline; a no-GPU backend saying why if it is late.

    The open has the deadline per GPU (in parallel); the rest of it (``nvmlInit``, counting the
    GPUs) gets as long again. A backend that opens after that is closed by its thread, and while
    that open is still out a later ``%gpu`` waits for it rather than start another
    (``readings/startup.py``).
    """

    def open_now() -> Backend:
        # The simulated GPUs show this server's kernels, from the moment its own backend
        # started, as the server's sampler does.
        pids = kernel_pids_of_server(default_root_pid()) if choice == "simulated" else []
        return open_backend(
            choice,
            simulated_devices=simulated_devices_from_env(),
            simulated_epoch=simulated_epoch_from_env(),
            pids=lambda: pids,
            deadline_s=deadline_s,
        )

    opened = call_within(
        NVML_START, "jupyter-gpu-once-open", open_now, 2 * deadline_s, lambda b: b.close()
    )
    if isinstance(opened, NotAnswered):
        return NoGpuBackend(
            f"NVML did not answer within {2 * deadline_s:g} s while starting (nvmlInit or "
            f"counting the GPUs has been out for {opened.waited_s:.0f} s: the driver is not "
            "responding)"
        )
    return opened


def read_once(
    backend: str = "auto",
    *,
    scan_cache: bool = False,
    slow: bool = False,
    deadline_s: float = READ_DEADLINE_S,
) -> Sample:
    """One reading of the GPUs and the host, now; no background sampler.

    NVML is initialised for this call and shut down after it (NVML counts inits, so a sampler
    in the same process is unaffected). Without a GPU the sample has ``backend == "none"`` and a
    ``reason``; nothing raises for a missing or failing GPU. ``processes[].kernel_id`` is
    ``None`` (kernel attribution needs the server); other users' processes are hidden as in the
    server (``ProcessAnnotator``). In a kernel of a simulated server, the simulated GPUs list
    that server's kernels, this one among them, as the server's own sampler does. Takes about
    0.1 s: host CPU % and the GPM metrics (SM/tensor activity, Hopper and newer) are measured
    over that window.

    A GPU that does not answer within ``deadline_s`` is ``state == "not_responding"`` with an
    ``error`` that names it ("GPU 1 did not answer within 2 s: ..."); the call then takes about
    ``deadline_s`` more (and at most ``2 * deadline_s`` more for a GPU that hangs while NVML
    opens, 4 times for a driver that hangs in ``nvmlInit``). The thread stuck in the call is
    left to it; NVML is shut down when it returns (``nvml.py``), and a later ``read_once`` does
    not ask that GPU again until then.

    Args:
        backend: ``auto`` (NVML if it works, else none), ``nvml``, ``simulated`` or ``none``.
        scan_cache: also walk the torch.compile caches (can take a second on a big cache).
        slow: also read the slow groups (``catalog.Group.slow``: PCIe throughput, about 21 ms
            per GPU with NVML).
        deadline_s: how long a GPU may take to answer.

    Raises:
        ValueError: for an unknown ``backend``.
    """
    host = HostReader()
    host.read()  # the first CPU reading only sets the baseline
    started = time.monotonic()
    opened = _open_within(backend, deadline_s)
    try:
        info = opened.info()
        indices = [d.index for d in info.devices]
        groups = tuple(g for g in catalog.layout().groups if slow or not g.slow)
        window_end = time.monotonic() + CPU_WINDOW_S
        reader: DeadlineReader[_Reading] = DeadlineReader(
            "jupyter-gpu-once",
            indices,
            lambda i: _read_gpu(opened, i, groups, window_end),
            deadline_s,
            _log,
            what="an NVML call",
        )
        asked = time.monotonic()
        try:
            reader.read(deadline_s + CPU_WINDOW_S)
            answers = {i: a.value for i, a in reader.answers().items()}
        finally:
            reader.close()
        cache = scan_caches() if scan_cache else NOT_SCANNED
        time.sleep(max(0.0, CPU_WINDOW_S - (time.monotonic() - started)))
    finally:
        opened.close()
    now = time.monotonic()
    ts = time.time()
    fast: list[FastReading] = []
    for d in info.devices:
        got = answers.get(d.index)
        if got is None:  # the sentence that names it comes with ``_named``
            fast.append((not_responding(d, now - asked, ""), None))
        else:
            fast.append((got.fast.value, got.fast.at))
    others: dict[str, dict[int, Timed[GroupReading]]] = {}
    for index, got in answers.items():
        for name, timed in got.others.items():
            others.setdefault(name, {})[index] = timed
    merged = merge_readings(info.devices, fast, others, now, StaleAfter())
    merged = tuple(_named(d, deadline_s) for d in merged)
    # In a kernel, "this server" is the Jupyter server that started it (JPY_PARENT_PID).
    return Sample(
        seq=0,
        ts=ts,
        backend=info.backend,
        simulated=info.simulated,
        reason=info.reason,
        devices=ProcessAnnotator().annotate(merged),
        host=host.read(),
        compile_cache=cache,
    )


def _named(device: DeviceSample, deadline_s: float) -> DeviceSample:
    """A not-responding device with the sentence that says which GPU did not answer."""
    if device.state != "not_responding":
        return device
    stale = device.stale_s if device.stale_s is not None else deadline_s
    message = NOT_ANSWERED_MESSAGE.format(index=device.index, deadline=deadline_s, stale=stale)
    return replace(device, error=message)


def topology_once(backend: str = "auto", *, deadline_s: float = READ_DEADLINE_S) -> Topology:
    """How the GPUs of ``backend`` are connected (``Backend.topology()``), read now.

    The backend opens behind the deadline, as for ``read_once``, and closes after; never
    raises for a missing or failing GPU (the topology's ``reason`` says why it is empty).

    Raises:
        ValueError: for an unknown ``backend``.
    """
    opened = _open_within(backend, deadline_s)
    try:
        return opened.topology()
    finally:
        opened.close()
