"""Objects that say what their state is (``state_dict``/``load_state_dict``): saved and put back.

LR schedulers, ``torch.amp.GradScaler``, EMA helpers and the like keep their whole state in what
``state_dict()`` returns; that is the contract ``torch.save`` checkpoints rely on. So before the
runs the helper keeps a copy of it (tensors copied once, where ``state.py`` places them; other
values deep-copied; functions kept as they are), puts it back with ``load_state_dict`` (a fresh
copy each time: a scheduler adopts the dict it is given), and afterwards compares a new
``state_dict()`` with the copy. Where a value cannot be compared (an object of a class with no
``__eq__``), the object is named as put back but not compared.
"""

from __future__ import annotations

import copy
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .equality import bitwise_equal, same_value

if TYPE_CHECKING:
    import torch

_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), range, slice)
#: Code, not state: kept as the same objects.
_CODE = (
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
    types.ModuleType,
    type,
)


@dataclass(frozen=True)
class SavedTensor:
    """A tensor's saved copy and the device the live one was on."""

    copy: torch.Tensor
    device: torch.device


class CannotCopy(Exception):
    """A ``state_dict`` holds a value that cannot be copied (the message says which)."""


def tensors_in(value: object) -> Iterator[torch.Tensor]:
    """The tensors a ``state_dict`` holds, nested ones included."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from tensors_in(item)


def save_tree(value: Any, copy_tensor: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """A copy of a ``state_dict``: tensors through ``copy_tensor``, the rest deep-copied.

    Raises:
        CannotCopy: a value that ``copy.deepcopy`` refuses.
    """
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return SavedTensor(copy_tensor(value), value.device)
    return _rebuild(value, lambda v: save_tree(v, copy_tensor))


def load_tree(saved: Any) -> Any:
    """A fresh copy of a saved ``state_dict``, its tensors back on their devices."""
    if isinstance(saved, SavedTensor):
        return saved.copy.to(saved.device, copy=True)
    return _rebuild(saved, load_tree)


def _rebuild(value: Any, inner: Callable[[Any], Any]) -> Any:
    if isinstance(value, (*_IMMUTABLE, *_CODE)):
        return value  # functions, classes, bound methods: shared, as pickling by name would
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, dict):
        out = copy.copy(value)  # keeps the type (OrderedDict, defaultdict and its factory)
        out.clear()
        for key, item in value.items():
            out[key] = inner(item)
        return out
    if isinstance(value, list):
        return [inner(item) for item in value]
    if isinstance(value, tuple):
        items = [inner(item) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    try:
        return copy.deepcopy(value)
    except Exception as exc:  # noqa: BLE001  # any refusal means it cannot be saved
        raise CannotCopy(f"a {type(value).__name__} that cannot be copied ({exc})") from None


def same_tree(live: Any, saved: Any) -> bool | None:
    """Whether a new ``state_dict()`` equals the saved copy: True, False, None (cannot tell)."""
    if isinstance(saved, SavedTensor):
        torch = sys.modules.get("torch")
        return bool(
            torch is not None and isinstance(live, torch.Tensor) and bitwise_equal(live, saved.copy)
        )
    if isinstance(saved, dict) and isinstance(live, dict):
        if live.keys() != saved.keys():
            return False
        return _all(same_tree(live[k], saved[k]) for k in saved)
    if isinstance(saved, list | tuple) and isinstance(live, list | tuple):
        if type(live) is not type(saved) or len(live) != len(saved):
            return False
        return _all(same_tree(a, b) for a, b in zip(live, saved, strict=True))
    return same_value(live, saved)


def _all(results: Iterator[bool | None]) -> bool | None:
    unknown = False
    for same in results:
        if same is False:
            return False
        unknown = unknown or same is None
    return None if unknown else True


def _between_steps(obj: Any) -> dict[Any, Any] | None:
    """A ``GradScaler``'s record of the optimizers it unscaled or stepped since ``update()``.

    Not in its state_dict (``update()`` empties it): a run that raised between
    ``scaler.step(opt)`` and ``scaler.update()`` would leave it filled, and the next
    ``scaler.step`` would then refuse ("step() has already been called since the last
    update()"). None for other objects.
    """
    table = vars(obj).get("_per_optimizer_states") if hasattr(obj, "__dict__") else None
    return table if isinstance(table, dict) else None


@dataclass
class SavedStateDict:
    """One object's ``state_dict``, saved before the runs."""

    label: str
    obj: Any
    saved: Any

    def __post_init__(self) -> None:
        steps = _between_steps(self.obj)
        #: A GradScaler saved between steps (its record empty): emptied again when put back.
        self.between_steps = steps is not None and not steps

    def restore(self) -> None:
        self.obj.load_state_dict(load_tree(self.saved))
        steps = _between_steps(self.obj)
        if self.between_steps and steps:
            steps.clear()

    def check(self) -> bool | None:
        """Whether its ``state_dict()`` is back as saved (None: it holds what cannot compare)."""
        if self.between_steps and _between_steps(self.obj):
            return False
        return same_tree(self.obj.state_dict(), self.saved)
