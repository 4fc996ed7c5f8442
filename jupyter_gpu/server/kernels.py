"""Which process id is which kernel of this server, and the notebook of its session.

Kernel and session state belongs to the event loop, so the map is built there, every few seconds,
and handed to the sampler thread as an immutable copy. Remote kernels (a gateway) have no local
pid and are left out. Each kernel's process is named by its pid and the start time it had when
the server first saw that pid (``sampling/process_facts.py``): if the kernel ends and another
process gets its pid before the next map, that process is not taken for the kernel.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from jupyter_core.utils import ensure_async

from jupyter_gpu.sampling import KernelMap, KernelRef, freeze_kernel_map
from jupyter_gpu.sampling.process_facts import ProcessId, start_time_s


def kernel_pid(kernel_manager: Any) -> int | None:
    """The local process id of one kernel, or ``None`` (remote kernel, not started, ended)."""
    provisioner = getattr(kernel_manager, "provisioner", None)
    pid = getattr(provisioner, "pid", None)
    if pid is None:  # jupyter_client before provisioners kept a Popen in .kernel
        pid = getattr(getattr(kernel_manager, "kernel", None), "pid", None)
    return int(pid) if isinstance(pid, int) and pid > 0 else None


def last_activity_ts(kernel_manager: Any) -> float | None:
    """When the kernel last did something (jupyter_server's ``last_activity``), Unix seconds."""
    when = getattr(kernel_manager, "last_activity", None)
    if isinstance(when, datetime):
        if when.tzinfo is None:  # jupyter_server stores UTC
            when = when.replace(tzinfo=timezone.utc)
        return when.timestamp()
    return None


async def build_kernel_map(
    multi_kernel_manager: Any,
    session_manager: Any,
    log: logging.Logger,
    seen: dict[str, ProcessId] | None = None,
) -> KernelMap:
    """Map each pid to (kernel id, notebook path) for this server's running local kernels.

    ``seen`` (kernel id -> pid and start time, kept by the caller from one map to the next)
    keeps each kernel process's start time from when its pid was first seen; kernels that are
    gone are dropped from it. Without it, the start time is read now.
    """
    known = seen if seen is not None else {}
    paths: dict[str, str | None] = {}
    if session_manager is not None:
        try:
            for session in await ensure_async(session_manager.list_sessions()):
                kernel = session.get("kernel") or {}
                if kernel.get("id"):
                    paths[kernel["id"]] = session.get("path")
        except Exception:  # the map is a nicety: never let it break monitoring
            log.debug("jupyter_gpu: could not list sessions", exc_info=True)
    mapping: dict[int, KernelRef] = {}
    for kernel_id in list(multi_kernel_manager.list_kernel_ids()):
        try:
            kernel = multi_kernel_manager.get_kernel(kernel_id)
        except KeyError:  # shut down since we listed it
            continue
        pid = kernel_pid(kernel)
        if pid is not None:
            if known.get(kernel_id, (None, None))[0] != pid:  # new, or restarted
                known[kernel_id] = (pid, start_time_s(pid))
            mapping[pid] = KernelRef(
                kernel_id=kernel_id,
                notebook=paths.get(kernel_id),
                last_activity_ts=last_activity_ts(kernel),
                busy=getattr(kernel, "execution_state", None) == "busy",
                started_s=known[kernel_id][1],
            )
    for gone in set(known) - {ref.kernel_id for ref in mapping.values()}:
        del known[gone]
    return freeze_kernel_map(mapping)
