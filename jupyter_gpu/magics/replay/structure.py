"""What a module or an optimizer *is*, besides its tensors: its attributes and its tables.

A step that registers a hook, adds a submodule or swaps a parameter changes no tensor value,
but the next call runs differently (one ``%compile --bench`` once left 302 forward hooks on a
model). torch keeps all of that in the object's ``__dict__``: for a module the tables
``_parameters``, ``_buffers``, ``_modules`` and every hook table (``_forward_hooks``,
``_forward_pre_hooks``, ``_backward_hooks``, ``_state_dict_hooks``...), for an optimizer its
step and state-dict hooks. :class:`SavedStructure` keeps which object each attribute held and
the entries of each table, and puts them back in place (the tables stay the same dict objects:
torch's ``RemovableHandle`` holds them). Saving is a shallow copy of each table: no tensor is
copied here.

A tensor's own hooks (``register_hook``, ``register_post_accumulate_grad_hook``) live in two
attributes of the tensor, kept by :class:`SavedTensorHooks`.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

_MISSING = object()
#: Marks torch.compile sets on the module it compiles (``torch/_dynamo/eval_frame.py`` sets
#: ``_is_torch_compile`` on the eager module when ``%compile`` wraps it, between the save and
#: the runs): the compile's, not the runs', so one that appears is kept and not reported.
_COMPILE_MARKS = frozenset(
    (
        "_is_torch_compile",
        "_torchdynamo_inline",
        "_torchdynamo_orig_callable",
        "_torchdynamo_wrapper_id",
        "_isolate_recompiles_id",
    )
)
#: How a changed table is named in the report ("model's hooks").
_WORDS = {
    "_parameters": "parameters",
    "_buffers": "buffers",
    "_modules": "submodules",
    "_non_persistent_buffers_set": "buffers",
}


def _word(name: str) -> str:
    if "hook" in name:
        return "hooks"
    return _WORDS.get(name, "attributes")


def _copy_table(value: Any) -> Any:
    return set(value) if isinstance(value, set) else dict(value)


def _same_table(live: Any, saved: Any) -> bool:
    if isinstance(saved, set):
        return bool(live == saved)
    return bool(live.keys() == saved.keys() and all(live[k] is v for k, v in saved.items()))


@dataclass
class SavedStructure:
    """One object's attributes (which objects) and its tables' entries, before the runs.

    ``skip``: attributes another part of the saved state puts back (an optimizer's ``state``).
    """

    label: str
    obj: Any
    cls: type = field(init=False)
    attributes: dict[str, Any] = field(init=False)
    tables: dict[str, Any] = field(init=False)
    skip: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.cls = type(self.obj)
        self.attributes = dict(vars(self.obj))
        self.tables = {
            name: _copy_table(value)
            for name, value in self.attributes.items()
            if isinstance(value, dict | set) and name not in self.skip
        }

    def differences(self) -> list[str]:
        """What differs now, in words (``hooks``, ``submodules``, ``attributes``...)."""
        live = vars(self.obj)
        words: list[str] = []
        added = live.keys() - self.attributes.keys() - _COMPILE_MARKS
        if type(self.obj) is not self.cls or added or self.attributes.keys() - live.keys():
            words.append("attributes")
        for name, value in self.attributes.items():
            replaced = live.get(name, _MISSING) is not value
            if replaced or (name in self.tables and not _same_table(value, self.tables[name])):
                words.append(_word(name))
        return list(dict.fromkeys(words))

    def restore(self) -> None:
        if type(self.obj) is not self.cls:
            self.obj.__class__ = self.cls  # torch.nn.utils.parametrize swaps the class
        live = vars(self.obj)
        for name in [n for n in live if n not in self.attributes and n not in _COMPILE_MARKS]:
            del live[name]
        for name, value in self.attributes.items():
            if live.get(name, _MISSING) is not value:
                live[name] = value
            saved = self.tables.get(name)
            if saved is not None and not _same_table(value, saved):
                value.clear()
                value.update(saved)


@dataclass
class SavedTensorHooks:
    """A leaf tensor's hook tables (``_backward_hooks``, ``_post_accumulate_grad_hooks``).

    ``label``: what holds the tensor, as the report names it (``model``, ``opt``, ``x``).
    """

    label: str
    tensor: torch.Tensor
    tables: dict[str, tuple[Any, dict[Any, Any] | None]] = field(init=False)

    def __post_init__(self) -> None:
        self.tables = {}
        for name in ("_backward_hooks", "_post_accumulate_grad_hooks"):
            table = getattr(self.tensor, name, None)
            self.tables[name] = (table, None if table is None else dict(table))

    def changed(self) -> bool:
        for name, (table, entries) in self.tables.items():
            live = getattr(self.tensor, name, None)
            if entries is None:
                if live:
                    return True
            elif live is not table or not _same_table(live, entries):
                return True
        return False

    def restore(self) -> None:
        for name, (table, entries) in self.tables.items():
            live = getattr(self.tensor, name, None)
            if entries is None:
                if live:
                    live.clear()  # no hook runs, as before (torch keeps the empty table)
                continue
            if live is not table:
                setattr(self.tensor, name, table if table is not None else OrderedDict())
            if not _same_table(table, entries):
                table.clear()
                table.update(entries)
