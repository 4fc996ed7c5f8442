"""The optimizer fix: the same optimizer class rebuilt with ``fused=True`` (or ``foreach=True``).

torch's optimizers have three implementations of one update (the ``torch.optim`` docs,
"Algorithms"): a loop over the parameters (``for-loop``), multi-tensor kernels (``foreach``, the
default for CUDA tensors) and fused kernels (``fused``, which the Adam and AdamW pages call
typically the fastest). Where the class takes ``fused`` and the optimizer is not fused, the fix
is the same class with the same parameter groups and state (its ``state_dict``), fused; else,
where it takes ``foreach`` and is not, foreach (the default on a CPU is the for-loop).

While it is tried, the notebook's name is bound to the rebuilt optimizer, which steps the same
parameters; the user's optimizer itself is never stepped by it and is put back with the rest.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .fixes import Fix, NotApplied

if TYPE_CHECKING:
    from .evidence import Evidence
    from .fixes import TuneSession


def implementation_flags(optimizer: Any) -> tuple[bool, bool]:
    """``(fused, foreach)`` as the optimizer's parameter groups have them."""
    groups = optimizer.param_groups
    return (
        any(bool(g.get("fused")) for g in groups),
        any(bool(g.get("foreach")) for g in groups),
    )


def takes(cls: type, keyword: str) -> bool:
    """Whether the optimizer class's constructor takes ``keyword`` (``fused``, ``foreach``)."""
    try:
        return keyword in inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False


def rebuild(optimizer: Any, how: str) -> Any:
    """A new optimizer of ``optimizer``'s class, groups and state, with ``how`` (fused/foreach).

    The groups keep their hyperparameters and parameters; the state is a deep copy of the
    optimizer's (``state_dict``), so the two never share a moment buffer. The flags are set in
    the copied state's groups too: ``load_state_dict`` takes the groups' settings from it, and
    puts ``step`` on the parameter's device for a fused optimizer only when the group says so.

    Raises:
        RuntimeError, ValueError, TypeError: torch refused (e.g. fused for a dtype or device it
            has no kernel for).
    """
    flags = {"fused": True, "foreach": None} if how == "fused" else {"foreach": True}
    cls = type(optimizer)
    groups = [{**g, **flags} for g in optimizer.param_groups]
    for g in groups:
        if how == "foreach" and "fused" in g:
            g["fused"] = None
    state = copy.deepcopy(optimizer.state_dict())
    for g in state["param_groups"]:
        g.update(flags)
        if how == "foreach" and "fused" in g:
            g["fused"] = None
    new = cls(groups, **flags)
    new.load_state_dict(state)
    return new


class FusedOptimizer(Fix):
    """The optimizer rebuilt fused (or foreach): see the module doc."""

    family = "optimizer"
    key = "optimizer"
    order = 10
    exact = True

    def __init__(self, how: str) -> None:
        self.how = how
        self.name = f"{how} optimizer"
        self.new: Any = None

    @classmethod
    def for_optimizer(cls, optimizer: Any) -> FusedOptimizer:
        fused, foreach = implementation_flags(optimizer) if optimizer is not None else (0, 0)
        klass = type(optimizer)
        if optimizer is not None and not fused and takes(klass, "fused"):
            return cls("fused")
        if optimizer is not None and not foreach and not fused and takes(klass, "foreach"):
            return cls("foreach")
        return cls("fused")

    def why_not(self, ev: Evidence) -> str | None:
        return None  # decided in plan.py, which knows the optimizer

    def explain_skip(self, optimizer: Any) -> str | None:
        """Why not, from the optimizer itself (``None``: try it)."""
        if optimizer is None:
            return "no --optimizer named: the step's optimizer is not known to %tune"
        fused, foreach = implementation_flags(optimizer)
        name = type(optimizer).__name__
        if fused:
            return f"{name} is fused already"
        if self.how == "foreach" and foreach:
            return f"{name} is foreach already, and takes no fused=True"
        if not takes(type(optimizer), self.how):
            return f"{name} takes neither fused=True nor foreach=True"
        return None

    def prepare(self, s: TuneSession) -> None:
        self.new = rebuild(s.target.optimizer, self.how)

    @contextlib.contextmanager
    def applied(self, s: TuneSession) -> Iterator[None]:
        name = s.target.optimizer_name
        assert name is not None
        assert self.new is not None
        with s.rebound(name, self.new):
            yield

    def code(self, s: TuneSession) -> list[str]:
        t = s.target
        name, opt = t.optimizer_name, t.optimizer
        module = type(opt).__module__
        ctor = (
            f"torch.optim.{type(opt).__name__}"
            if module.startswith("torch.optim")
            else (f"type({name})")
        )
        flags = "fused=True, foreach=None" if self.how == "fused" else "foreach=True"
        return [
            f"_state = {name}.state_dict()  # the same groups and moments, {self.how}:",
            f"{name} = {ctor}([dict(g, {flags}) for g in {name}.param_groups], {flags})",
            'for _group in _state["param_groups"]:',
            f"    _group.update({flags})",
            f"{name}.load_state_dict(_state)",
        ]

    def apply(self, s: TuneSession) -> str:
        t = s.target
        name = t.optimizer_name
        assert name is not None
        holders = _holders(s.user_ns, t.optimizer)
        if holders:
            raise NotApplied(
                f"{', '.join(holders)} hold(s) {name} and would keep stepping the old one; "
                "paste the cell's lines and rebuild them with the new optimizer"
            )
        new = rebuild(t.optimizer, self.how)
        s.user_ns[name] = new
        return f"{name} is a {type(new).__name__} with {self.how}=True now (same groups and state)"

    def release(self, s: TuneSession) -> None:
        self.new = None


def _holders(user_ns: dict[str, Any], optimizer: Any) -> list[str]:
    """Notebook objects (schedulers, scalers' wrappers) that hold ``optimizer`` as an attribute."""
    found = []
    for name, value in user_ns.items():
        if name.startswith("_") or value is optimizer:
            continue
        attrs = getattr(value, "__dict__", None)
        if isinstance(attrs, dict) and any(v is optimizer for v in attrs.values()):
            found.append(name)
    return found
