"""After an out-of-memory error: what the last traceback and ``Out`` hold, and freeing it.

A traceback keeps every frame of the failed call alive, with its local variables: the
activations of a forward pass that ran out of memory stay allocated until the next error
replaces it (``_last_error`` says who holds it). IPython's output cache (``Out[n]``, ``_``,
``_n``) keeps every displayed value alive too. Freeing clears the failed call's frames and drops
exactly these references, never a user's variable.
"""

from __future__ import annotations

import gc
import weakref
from dataclasses import dataclass, field
from typing import Any

from jupyter_gpu.magics.shell.lazy_torch import (
    cuda_in_use,
    holds_no_memory,
    tensor_bytes,
    torch_if_imported,
)

from .last_error import last_error, last_error_tracebacks, release_last_error, traceback_locals
from .tensors import holds_tensor, output_cache


def is_oom(error: BaseException | None) -> bool:
    """True for torch's out-of-memory error (``torch.OutOfMemoryError``, older: in torch.cuda)."""
    torch = torch_if_imported()
    if torch is None or error is None:  # without torch imported, nothing raised one
        return False
    oom = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    return isinstance(error, oom)


def last_error_was_oom() -> bool:
    """True if the last failed cell ran out of (CUDA) memory."""
    return is_oom(last_error())


@dataclass
class FreeReport:
    """What ``%memsummary --free`` released: references dropped, tensors and bytes freed.

    ``freed_bytes`` comes from the CUDA allocator (allocated before minus after) when CUDA is
    in use, else from the storages of the tensors that were collected.
    """

    cleared: list[str] = field(default_factory=list)
    tensors_freed: int = 0
    freed_bytes: int = 0
    reserved_released_bytes: int = 0


def _candidates(shell: Any) -> list[tuple[weakref.ref[Any], int, int]]:
    """(weak reference, storage address, storage bytes) of the tensors the references hold."""
    torch = torch_if_imported()
    if torch is None:
        return []
    found: dict[int, tuple[weakref.ref[Any], int, int]] = {}

    def collect(value: Any, depth: int = 0) -> None:
        if isinstance(value, torch.Tensor):
            if holds_no_memory(value):
                return
            try:
                ptr = int(value.untyped_storage().data_ptr())
            except (RuntimeError, NotImplementedError):
                return
            found.setdefault(id(value), (weakref.ref(value), ptr, tensor_bytes(value)))
        elif depth < 3 and isinstance(value, dict):
            for item in list(value.values())[:200]:
                collect(item, depth + 1)
        elif depth < 3 and isinstance(value, list | tuple):
            for item in list(value)[:200]:
                collect(item, depth + 1)

    for _, value in traceback_locals(last_error_tracebacks(shell)):
        collect(value)
    for _, value in output_cache(shell):
        collect(value)
    for name in ("_", "__", "___"):
        collect(shell.user_ns.get(name))
    return list(found.values())


def free_references(shell: Any) -> FreeReport:
    """Drop the last traceback and the cached outputs that hold tensors; empty CUDA's cache."""
    torch = torch_if_imported()
    report = FreeReport()
    candidates = _candidates(shell)
    before = torch.cuda.memory_allocated() if cuda_in_use() and torch else 0
    reserved_before = torch.cuda.memory_reserved() if cuda_in_use() and torch else 0

    if release_last_error(shell):
        report.cleared.append("the last error's traceback (its frames' variables)")

    out = shell.user_ns.get("Out")
    if isinstance(out, dict):
        # No local variable may hold a value here: it would survive the collection below.
        for n in [n for n, held in list(out.items()) if holds_tensor(held)]:
            if shell.user_ns.get(f"_{n}") is out[n]:
                del shell.user_ns[f"_{n}"]
            if shell.user_ns_hidden.get(f"_{n}") is out[n]:
                del shell.user_ns_hidden[f"_{n}"]
            del out[n]
            report.cleared.append(f"Out[{n}]")
    hook = shell.displayhook
    for name in ("_", "__", "___"):
        cached = getattr(hook, name, None)
        if cached is not None and holds_tensor(cached):
            setattr(hook, name, "")
            if shell.user_ns.get(name) is cached:  # not a value the user assigned themselves
                shell.user_ns[name] = ""
            if shell.user_ns_hidden.get(name) is cached:  # IPython's copy, to tell them apart
                shell.user_ns_hidden[name] = ""
            report.cleared.append(name)
        cached = None

    # IPython keeps the previous cell's ExecutionResult, whose .result is its displayed value.
    last = getattr(shell, "last_execution_result", None)
    if last is not None and holds_tensor(getattr(last, "result", None)):
        last.result = None

    gc.collect()
    alive_ptrs = {ptr for ref, ptr, _ in candidates if ref() is not None}
    dead = {ptr: size for ref, ptr, size in candidates if ref() is None and ptr not in alive_ptrs}
    report.tensors_freed = sum(1 for ref, _, _ in candidates if ref() is None)
    if cuda_in_use() and torch is not None:
        torch.cuda.synchronize()
        report.freed_bytes = max(0, before - torch.cuda.memory_allocated())
        torch.cuda.empty_cache()
        report.reserved_released_bytes = max(0, reserved_before - torch.cuda.memory_reserved())
    else:
        report.freed_bytes = sum(dead.values())  # storages no candidate still holds
    return report
