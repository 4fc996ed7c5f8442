"""Find the live tensors of a notebook and the names that hold them.

The walk starts from the notebook's variables (modules' parameters and buffers, optimizer
state, containers and plain objects a few levels deep), then IPython's output cache (``Out[n]``)
and the last error's traceback frames (and those of its causes), whose local variables stay
alive until the next error. Tensors are grouped by storage, so views of one tensor count once.
A ``gc`` pass finds the tensors that no notebook name reaches (held by libraries, closures,
compiled graphs).
"""

from __future__ import annotations

import gc
import sys
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from jupyter_gpu.magics.shell.lazy_torch import holds_no_memory, tensor_bytes, torch_module

from .last_error import last_error_tracebacks, traceback_locals

#: Where a name comes from, best first: a user's variable beats ``Out[3]`` beats a traceback.
USER, OUTPUT, TRACEBACK, UNNAMED = 0, 1, 2, 3

_MAX_DEPTH = 4
_MAX_ITEMS = 200  # per container
_MAX_VISITS = 50_000  # per walk: a bound on time for huge object graphs
_SKIP_TYPES = (
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    type,
    str,
    bytes,
    int,
    float,
    bool,
)


@dataclass
class TensorInfo:
    """One storage (views of it count once): its size and the notebook names that hold it."""

    nbytes: int
    shape: tuple[int, ...]
    dtype: str
    device: str
    names: list[str] = field(default_factory=list)
    origin: int = USER

    @property
    def label(self) -> str:
        """The names for a table cell: the first three, then how many more."""
        if not self.names:
            return "(no notebook name: held inside a library, closure or compiled graph)"
        extra = f" (+{len(self.names) - 3} more)" if len(self.names) > 3 else ""
        return ", ".join(self.names[:3]) + extra


@dataclass
class TensorCensus:
    """Every storage found, keyed by (device, address), and the bytes no name reaches."""

    by_storage: dict[tuple[str, int], TensorInfo] = field(default_factory=dict)
    unnamed_count: int = 0
    unnamed_bytes: int = 0

    def largest(self, n: int) -> list[TensorInfo]:
        return sorted(self.by_storage.values(), key=lambda t: t.nbytes, reverse=True)[:n]

    def held_only_by(self, *origins: int) -> list[TensorInfo]:
        """The storages whose best name is of one of ``origins`` (e.g. ``OUTPUT, TRACEBACK``)."""
        return [t for t in self.by_storage.values() if t.origin in origins]


def device_matches(t: Any, device: str | None) -> bool:
    """True if tensor ``t`` lives on ``device`` ("cuda:0", "cpu"; ``None`` matches any)."""
    if device is None:
        return True
    dev = t.device
    if device == "cpu":
        return bool(dev.type == "cpu")
    kind, _, index = device.partition(":")
    return bool(dev.type == kind and (not index or dev.index == int(index)))


class _Walker:
    def __init__(self, device: str | None) -> None:
        self.torch = torch_module()
        self.device = device
        self.census = TensorCensus()
        self.visited: set[int] = set()
        self.param_names: dict[int, str] = {}
        self.visits = 0

    def tensor(self, t: Any, name: str, origin: int) -> None:
        if not device_matches(t, self.device) or holds_no_memory(t):
            return
        try:
            ptr = int(t.untyped_storage().data_ptr())
        except (RuntimeError, NotImplementedError):  # sparse, nested or fake tensors
            return
        if ptr == 0:
            return
        key = (str(t.device), ptr)
        info = self.census.by_storage.get(key)
        if info is None:
            info = TensorInfo(
                tensor_bytes(t), tuple(t.shape), str(t.dtype).replace("torch.", ""), str(t.device)
            )
            info.origin = origin
            self.census.by_storage[key] = info
        info.origin = min(info.origin, origin)
        if name not in info.names:
            info.names.append(name)

    def visit(self, value: Any, name: str, origin: int, depth: int = 0) -> None:
        torch = self.torch
        if isinstance(value, torch.Tensor):
            self.tensor(value, name, origin)
            grad = value.grad if value.is_leaf else None
            if grad is not None:
                self.tensor(grad, name + ".grad", origin)
            return
        if value is None or isinstance(value, _SKIP_TYPES):
            return
        if id(value) in self.visited or depth > _MAX_DEPTH or self.visits > _MAX_VISITS:
            return
        self.visited.add(id(value))
        self.visits += 1
        if isinstance(value, torch.nn.Module):
            self._module(value, name, origin)
        elif isinstance(value, torch.optim.Optimizer):
            self._optimizer(value, name, origin)
        elif isinstance(value, dict):
            for key, item in _first(value.items()):
                self.visit(item, f"{name}[{_short_repr(key)}]", origin, depth + 1)
        elif isinstance(value, list | tuple | set | frozenset):
            for i, item in enumerate(_first(iter(value))):
                self.visit(item, f"{name}[{i}]", origin, depth + 1)
        elif depth < 2 and hasattr(value, "__dict__") and not callable(value):
            # Plain objects (a trainer, a dataclass): their instance attributes, never properties.
            attrs = vars(value)
            for key, item in _first(iter(attrs.items())):
                if isinstance(key, str) and not key.startswith("__"):
                    self.visit(item, f"{name}.{key}", origin, depth + 1)

    def _module(self, module: Any, name: str, origin: int) -> None:
        for pname, param in module.named_parameters():
            full = f"{name}.{pname}"
            self.param_names.setdefault(id(param), full)
            self.visit(param, full, origin)
        for bname, buf in module.named_buffers():
            self.tensor(buf, f"{name}.{bname}", origin)

    def _optimizer(self, optimizer: Any, name: str, origin: int) -> None:
        index = 0
        for group in optimizer.param_groups:
            for param in group["params"]:
                pname = self.param_names.get(id(param), f"param {index}")
                index += 1
                for key, item in optimizer.state.get(param, {}).items():
                    if isinstance(item, self.torch.Tensor):
                        self.tensor(item, f"{name}.state[{pname}][{key!r}]", origin)


def _first(items: Iterator[Any] | Any) -> Iterator[Any]:
    for i, item in enumerate(items):
        if i >= _MAX_ITEMS:
            return
        yield item


def _short_repr(key: Any) -> str:
    text = repr(key)
    return text if len(text) <= 40 else text[:37] + "..."


def user_variables(shell: Any) -> Iterator[tuple[str, Any]]:
    """The notebook's own variables: not IPython's (In, Out, _i3, _3) nor modules or functions."""
    hidden = shell.user_ns_hidden
    for name, value in list(shell.user_ns.items()):
        if name.startswith("_"):
            continue
        if name in hidden and hidden[name] is value:
            continue
        if isinstance(value, types.ModuleType | types.FunctionType | type):
            continue
        yield name, value


def output_cache(shell: Any) -> Iterator[tuple[str, Any]]:
    """IPython's output cache, ``Out[n]``: values shown by earlier cells, kept alive by it."""
    out = shell.user_ns.get("Out")
    if isinstance(out, dict):
        for n, value in list(out.items()):
            yield f"Out[{n}]", value


def census(shell: Any, device: str | None, *, find_unnamed: bool = True) -> TensorCensus:
    """Every tensor on ``device`` that the notebook's names reach, largest first.

    With ``find_unnamed``, a pass over the garbage collector's objects adds up the tensors no
    name reaches (a few tens of ms in a large session).
    """
    walker = _Walker(device)
    variables = list(user_variables(shell))
    # Modules first, so that optimizer state is named after the parameters it belongs to.
    variables.sort(key=lambda item: not isinstance(item[1], walker.torch.nn.Module))
    for name, value in variables:
        walker.visit(value, name, USER)
    for name, value in output_cache(shell):
        walker.visit(value, name, OUTPUT)
    # The notebook's namespace, met again in a magic's frame (its local_ns), holds nothing
    # more than the names above: its tensors are not the last error's.
    walker.visited.update((id(shell.user_ns), id(shell.user_global_ns)))
    for name, value in traceback_locals(last_error_tracebacks(shell)):
        walker.visit(value, name, TRACEBACK)
    if find_unnamed:
        _count_unnamed(walker)
    return walker.census


def _count_unnamed(walker: _Walker) -> None:
    torch = walker.torch
    named = walker.census.by_storage
    unnamed: dict[tuple[str, int], TensorInfo] = {}
    objects = []
    with warnings.catch_warnings():
        # isinstance() on some objects (deprecated torch aliases) warns; not ours to show.
        warnings.simplefilter("ignore")
        for obj in gc.get_objects():
            try:
                if isinstance(obj, torch.Tensor):
                    objects.append(obj)
            except ReferenceError:  # a weakref.proxy whose object is gone
                continue
    for obj in objects:
        try:
            if not device_matches(obj, walker.device) or holds_no_memory(obj):
                continue
            ptr = int(obj.untyped_storage().data_ptr())
        except (RuntimeError, NotImplementedError, ReferenceError):
            continue
        key = (str(obj.device), ptr)
        if ptr == 0 or key in named or key in unnamed:
            continue
        unnamed[key] = TensorInfo(
            tensor_bytes(obj),
            tuple(obj.shape),
            str(obj.dtype).replace("torch.", ""),
            str(obj.device),
        )
    walker.census.unnamed_count = len(unnamed)
    walker.census.unnamed_bytes = sum(t.nbytes for t in unnamed.values())
    for key, info in unnamed.items():
        info.origin = UNNAMED
        named[key] = info


def holds_tensor(value: Any) -> bool:
    """True if ``value`` is, or contains (a few levels deep), a torch tensor."""
    if "torch" not in sys.modules:
        return False
    walker = _Walker(None)
    walker.visit(value, "value", USER)
    return bool(walker.census.by_storage)
