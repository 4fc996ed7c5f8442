"""Per-op totals of a finished profile: the figures of ``key_averages()``, summed in one pass.

torch's ``EventList.key_averages()`` reads ``device_time_total`` of every event three times,
and each read walks the event's whole subtree again; it also builds each key from four
``str()`` calls on pybind objects. On a CUDA profile of ten thousand events that is most of
the post-processing time. ``OpTotals`` adds up the same quantities with the same formulas and
in the same order (so the floats come out bit for bit the same), remembering each subtree's
device time once. ``rows_from_key_averages`` is torch's own path: the fallback for a torch
whose events lack a field read here, and the reference the tests compare against.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_US = 1e-6
#: A Python-function event's name ("file.py(12): fn"), recorded with ``with_stack``.
PY_EVENT = re.compile(r"^(?P<file>.*)\((?P<line>\d+)\): (?P<fn>.*)$")

#: FunctionEvent fields OpTotals reads; a torch without one of them uses key_averages().
_FIELDS = (
    "key",
    "node_id",
    "is_legacy",
    "is_user_annotation",
    "is_async",
    "use_device",
    "time_range",
    "cpu_children",
    "kernels",
    "count",
    "cpu_memory_usage",
    "device_memory_usage",
)


@dataclass(frozen=True)
class OpRow:
    """One row's totals over the cell (seconds, bytes); ``called_from`` needs ``--stack``.

    ``on_gpu``: the row is GPU work itself (a kernel, a copy, a memset, named as the GPU ran
    it); otherwise it is an op on the CPU, whose GPU columns add up the kernels it launched.
    """

    name: str
    calls: int
    self_cpu_s: float
    cpu_s: float
    self_gpu_s: float
    gpu_s: float
    self_cpu_mem_bytes: int
    self_gpu_mem_bytes: int
    called_from: str = ""
    on_gpu: bool = False


def device_kind(evt: Any) -> int:
    """``evt.device_type`` as an int: comparing the pybind enum itself costs ~0.4 µs a time."""
    return int(evt.device_type.value)


def cpu_kind() -> int:
    """The ``device_kind`` of CPU events."""
    from torch._C._autograd import DeviceType  # what FunctionEvent.device_type holds

    return int(DeviceType.CPU.value)


#: The profiler's own bookkeeping, recorded by CUPTI as "overhead" activities: not the user's
#: work (torch.profiler._cupti_monitor names the same kinds).
BOOKKEEPING = frozenset(
    (
        "Activity Buffer Request",
        "Buffer Flush",
        "Instrumentation",
        "Resource",
        "Driver Compiler",
        "Runtime Triggered Module Loading",
        "Lazy Function Loading",
        "Command Buffer Full",
        "UVM Activity Init",
        "CUPTI Overhead",
    )
)


def is_shown(name: str) -> bool:
    """False for rows the table leaves out (memory records, Python functions, bookkeeping)."""
    return not (
        name == "[memory]"
        or name in BOOKKEEPING
        or name.startswith(("ProfilerStep", "<built-in"))
        or PY_EVENT.match(name)
    )


class OpTotals:
    """Sums per key (name, node, device type, legacy, annotation) as ``key_averages()`` does.

    Per key, in this order: calls, CPU total, self CPU, device total, self device, self CPU
    memory, self device memory (microseconds and bytes, as torch keeps them).
    """

    def __init__(self, cpu: int) -> None:
        self._cpu = cpu
        self._by_key: dict[tuple[Any, ...], list[Any]] = {}
        self._device_total: dict[int, Any] = {}  # id(event) -> its subtree's device time

    @classmethod
    def for_events(cls, events: Any) -> OpTotals | None:
        """An empty ``OpTotals``, or ``None`` if these events lack a field it reads."""
        first = next(iter(events), None)
        if first is not None and not all(hasattr(first, f) for f in _FIELDS):
            return None
        return cls(cpu_kind())

    def add(self, evt: Any, kind: int) -> None:
        """Add one event (``kind``: its ``device_kind``), as ``FunctionEventAvg.add`` would.

        The formulas are those of ``FunctionEvent``'s ``*_total`` and ``self_*`` properties.
        """
        key = (evt.key, evt.node_id, kind, evt.is_legacy, evt.is_user_annotation)
        acc = self._by_key.get(key)
        if acc is None:
            acc = self._by_key[key] = [0, 0, 0, 0, 0, 0, 0]
        elapsed = evt.time_range.elapsed_us()
        if kind == self._cpu:
            cpu_total = elapsed
            children = evt.cpu_children
            if evt.is_async:
                self_cpu = device = self_device = self_cpu_mem = self_device_mem = 0
            elif children:
                self_cpu = elapsed - sum(ch.time_range.elapsed_us() for ch in children)
                if evt.use_device:
                    device = self._cpu_device_total(evt)
                    self_device = device - sum(self._of_child(ch) for ch in children)
                else:
                    device = self_device = 0
                self_cpu_mem = evt.cpu_memory_usage - sum(ch.cpu_memory_usage for ch in children)
                self_device_mem = evt.device_memory_usage - sum(
                    ch.device_memory_usage for ch in children
                )
            else:  # a leaf (most events): x - sum(()) is x, so skip the empty sums
                self_cpu = elapsed
                device = self_device = self._cpu_device_total(evt) if evt.use_device else 0
                self_cpu_mem = evt.cpu_memory_usage
                self_device_mem = evt.device_memory_usage
        else:
            cpu_total = self_cpu = self_cpu_mem = self_device_mem = 0
            device = self_device = 0 if evt.is_async or not evt.use_device else elapsed
        acc[0] += evt.count
        acc[1] += cpu_total
        acc[2] += self_cpu
        acc[3] += device
        acc[4] += self_device
        acc[5] += self_cpu_mem
        acc[6] += self_device_mem

    def _of_child(self, evt: Any) -> Any:
        """``evt.device_time_total`` (0 for async events or without a device)."""
        if evt.is_async or not evt.use_device:
            return 0
        if device_kind(evt) != self._cpu:
            return evt.time_range.elapsed_us()
        return self._cpu_device_total(evt)

    def _cpu_device_total(self, evt: Any) -> Any:
        """A CPU op's kernels plus its children's device time, computed once per op."""
        total = self._device_total.get(id(evt))
        if total is None:
            total = sum(k.duration for k in evt.kernels) if evt.kernels else 0
            children = evt.cpu_children
            if children and not evt.is_legacy:  # a legacy event's one (fake) kernel has it all
                total += sum(self._of_child(ch) for ch in children)
            self._device_total[id(evt)] = total
        return total

    def rows(self, called_from: dict[str, str]) -> list[OpRow]:
        """The table's rows, in the order ``key_averages()`` lists them (no annotations)."""
        rows = []
        for key, acc in self._by_key.items():
            name = str(key[0])
            if key[4] or not is_shown(name):  # key[4]: a user annotation, shown as a range
                continue
            calls, cpu_total, self_cpu, device, self_device, self_cpu_mem, self_dev_mem = acc
            rows.append(
                OpRow(
                    name=name,
                    calls=int(calls),
                    self_cpu_s=float(self_cpu) * _US,
                    cpu_s=float(cpu_total) * _US,
                    self_gpu_s=float(self_device) * _US,
                    gpu_s=float(device) * _US,
                    self_cpu_mem_bytes=int(float(self_cpu_mem)),
                    self_gpu_mem_bytes=int(float(self_dev_mem)),
                    called_from=called_from.get(name, ""),
                    on_gpu=key[2] != self._cpu,
                )
            )
        return rows


def _num(obj: Any, *names: str) -> float:
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return float(value)
    return 0.0


def rows_from_key_averages(prof: Any, called_from: dict[str, str]) -> list[OpRow]:
    """Per-op totals from torch's ``prof.key_averages()`` (any torch 2.4+), no annotations."""
    rows = []
    for avg in prof.key_averages():
        name = str(avg.key)
        if getattr(avg, "is_user_annotation", False) or not is_shown(name):
            continue
        rows.append(
            OpRow(
                name=name,
                calls=int(avg.count),
                self_cpu_s=_num(avg, "self_cpu_time_total") * _US,
                cpu_s=_num(avg, "cpu_time_total") * _US,
                self_gpu_s=_num(avg, "self_device_time_total", "self_cuda_time_total") * _US,
                gpu_s=_num(avg, "device_time_total", "cuda_time_total") * _US,
                self_cpu_mem_bytes=int(_num(avg, "self_cpu_memory_usage")),
                self_gpu_mem_bytes=int(
                    _num(avg, "self_device_memory_usage", "self_cuda_memory_usage")
                ),
                called_from=called_from.get(name, ""),
                on_gpu=str(getattr(avg, "device_type", "CPU")).rsplit(".", 1)[-1] != "CPU",
            )
        )
    return rows
