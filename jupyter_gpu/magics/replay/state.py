"""A copy of everything repeated runs may change, put back in place afterwards and checked.

What is saved (see ``replay/reach.py`` for how the reached objects are found):

- each named model, submodule by submodule: its parameters and buffers (the objects, their
  values and ``requires_grad``), their gradients and hooks, plain tensor attributes, and what
  the module *is* (``structure.py``: its ``__dict__``, the tables ``_parameters``,
  ``_buffers``, ``_modules`` and every hook table, ``training``);
- each named optimizer: every parameter of its ``param_groups`` that no named model holds
  (value, gradient, hooks), its per-parameter state, its param_groups (every value but the
  parameters, which stay the same objects) and its hook tables;
- the tensors and arrays the code reaches, and the gradients of the reached leaf tensors;
  modules the code reaches whose tensors the optimizers hold (their structure);
- objects with ``state_dict``/``load_state_dict`` (LR schedulers, ``GradScaler``, EMA
  helpers), through those (``stateful.py``);
- the containers, generators, name bindings and closure cells the code reaches;
- the RNG: torch's CPU generator and every CUDA device's, Python's ``random``, NumPy's global
  one; the process-wide settings (``settings.py``: grad and anomaly mode, autocast, TF32,
  determinism, threads, logging levels...);
- the CUDA allocator's peak counters (``memory_stats``' ``*.peak``), to check afterwards. torch
  has no way to set a peak counter: ``reset_peak_memory_stats`` sets it to the memory in use
  now. So the counters are never reset here: when the runs stay within the peak that was there
  before, they end as they were; when a run went higher, the counter keeps that run's peak and
  the report says so.

Every tensor is copied once. Where the copy lives is decided before copying: on the GPU when it
fits well within the memory the GPU has left, else on the host (pinned while that fits), so a
model sized to the GPU does not run out of memory. ``restore`` copies the saved values back
into the live tensors, in place (a tensor whose shape, dtype or device was changed gets its
data back), so no second copy is made on the GPU; objects the runs replaced are put back too.
``check`` then compares each saved thing with what is live (tensors with one ``torch.equal``
each, on their device) and says what it could not compare.
"""

from __future__ import annotations

import contextlib
import copy
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from jupyter_gpu.magics.output.render import fmt_bytes
from jupyter_gpu.magics.shell.lazy_torch import cuda_in_use, torch_module

from .equality import bitwise_equal, same_value
from .reach import Problem, Reached
from .settings import SavedSettings
from .stateful import CannotCopy, SavedStateDict, save_tree, tensors_in
from .structure import SavedStructure, SavedTensorHooks

if TYPE_CHECKING:
    import torch

__all__ = ["RestoredPart", "SavedState", "StateCheck", "bitwise_equal"]

#: Keep the copy on the GPU only while it takes at most this share of the memory the GPU has
#: left beside the most this process's allocator has reserved (:func:`room_beside_the_runs`:
#: the runs still need theirs); on the host, pinned up to this share of the available
#: RAM, pageable above it, and at most the last share.
GPU_SHARE = 0.4
PINNED_SHARE = 0.6
HOST_SHARE = 0.85
_MISSING = object()


@dataclass(frozen=True)
class RestoredPart:
    """One thing the runs could change that was saved and put back (``Restored.parts``).

    ``kind``: ``model``, ``optimizer``, ``module`` (a reached module whose tensors an optimizer
    holds), ``state_dict``, ``tensor``, ``gradient``, ``container``, ``generator``,
    ``binding``, ``closure``, ``rng`` or ``setting``. ``compared``: checked against its saved
    copy after putting it back; ``detail``: what more the report says of it (the optimizer's
    parameters outside the models, or why it was not compared).
    """

    label: str
    kind: str
    compared: bool = True
    detail: str = ""


@dataclass(frozen=True)
class StateCheck:
    """What :meth:`SavedState.check` found after putting everything back."""

    #: What differs from its saved copy (labels: tensors, tables, settings).
    mismatched: list[str] = field(default_factory=list)
    #: Part label -> why it could not be compared.
    uncompared: dict[str, str] = field(default_factory=dict)


@dataclass
class _Tensor:
    """One live tensor (or NumPy array) and its saved value."""

    label: str
    live: Any
    saved: Any
    device: Any = None
    requires_grad: bool = False


@dataclass
class _Grad:
    """A leaf tensor's gradient: its saved copy, or None where it had none."""

    label: str
    tensor: torch.Tensor
    saved: torch.Tensor | None


@dataclass
class _Optimizer:
    label: str
    optimizer: torch.optim.Optimizer
    groups: list[tuple[dict[str, Any], dict[str, Any], list[torch.Tensor]]]
    state: dict[int, dict[str, Any]]  # index of the parameter -> its state, values saved
    params: list[torch.Tensor]
    structure: SavedStructure
    #: How many of its parameters no named model holds (saved here).
    outside: int = 0
    devices: dict[tuple[int, str], torch.device] = field(default_factory=dict)


def _tensors_of(value: object) -> Iterator[torch.Tensor]:
    import torch  # loaded already: an optimizer holds the value

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors_of(v)


class SavedState:
    """What the runs may change, saved before them (see the module doc).

    Raises:
        UsageError: neither the GPU nor the host has room for the copy; ``what`` names the
            magic in the message.
    """

    def __init__(
        self,
        models: dict[str, torch.nn.Module],
        optimizers: dict[str, torch.optim.Optimizer],
        reached: Reached | None = None,
        *,
        what: str = "the magic",
    ) -> None:
        torch_module()  # the UsageError that says how to install torch, where it is missing
        import torch

        self.what = what
        self.models = models
        self.optimizers = optimizers
        self.reached = reached or Reached()
        self.settings = SavedSettings(self.reached.process)
        #: What could not be saved after all (a state_dict that cannot be copied).
        self.unsaved: list[Problem] = []
        #: What the runs had changed in the tables and settings (words), over every restore.
        self.changed: list[str] = []
        self._failed: list[str] = []
        state_dicts = self._state_dicts()
        self.gpu_room = self.host_room = 0
        live = self._live_tensors(state_dicts)
        self.saved_bytes = sum(int(t.numel() * t.element_size()) for t in live if t.is_cuda)
        self.where, self.pinned = self._place(self.saved_bytes)
        self.tensors: list[_Tensor] = []
        self.grads: list[_Grad] = []
        self.structures: list[SavedStructure] = []
        self.tensor_hooks: list[SavedTensorHooks] = []
        self._saved_ids: set[int] = set()
        self._module_ids: set[int] = set()
        self._reached_grads: list[str] = []
        for name, model in models.items():
            self._save_module(name, model)
        self.optimizer_states = [self._save_optimizer(n, o) for n, o in optimizers.items()]
        for label, module in self.reached.modules.items():
            self._save_module(label, module)
        self._save_reached()
        self.stateful = self._save_state_dicts(state_dicts)
        if self.where == "cpu":
            torch.cuda.synchronize()  # the non-blocking copies to pinned memory are done
        self.cuda_devices = list(range(torch.cuda.device_count())) if cuda_in_use() else []
        self.rng = self._save_rng()
        self.peaks = self._peaks()

    # ---------------------------------------------------------------- what to save

    def _state_dicts(self) -> dict[str, tuple[Any, Any]]:
        out = {}
        for label, obj in self.reached.stateful.items():
            try:
                out[label] = (obj, obj.state_dict())
            except Exception as exc:  # noqa: BLE001  # any failure: it cannot be saved
                self.unsaved.append(
                    Problem(label, f"its state_dict() failed ({type(exc).__name__}: {exc})")
                )
        return out

    def _live_tensors(self, state_dicts: dict[str, tuple[Any, Any]]) -> list[torch.Tensor]:
        import torch

        out: list[torch.Tensor] = []
        for model in [*self.models.values(), *self.reached.modules.values()]:
            for t in [*model.parameters(), *model.buffers()]:
                out.append(t)
                if t.grad is not None:
                    out.append(t.grad)
        for opt in self.optimizers.values():
            for group in opt.param_groups:
                for p in group["params"]:
                    out.append(p)
                    if p.grad is not None:
                        out.append(p.grad)
            for state in opt.state.values():
                out += list(_tensors_of(state))
        for t in self.reached.tensors.values():
            if isinstance(t, torch.Tensor):
                out.append(t)
                if t.is_leaf and t.grad is not None:
                    out.append(t.grad)
        for _, state_dict in state_dicts.values():
            out += list(tensors_in(state_dict))
        unique = {id(t): t for t in out}  # a parameter held by a model and an optimizer: once
        return list(unique.values())

    def _place(self, nbytes: int) -> tuple[str, bool]:
        """("cuda" or "cpu", pinned): where a copy of ``nbytes`` of GPU tensors fits."""
        import torch

        if nbytes == 0 or not cuda_in_use():
            return "same", False
        free, _ = torch.cuda.mem_get_info()
        self.gpu_room = room_beside_the_runs(
            int(free), torch.cuda.memory_reserved(), torch.cuda.max_memory_reserved()
        )
        if nbytes <= GPU_SHARE * self.gpu_room:
            return "cuda", False
        import psutil

        self.host_room = int(psutil.virtual_memory().available)
        if nbytes <= PINNED_SHARE * self.host_room:
            return "cpu", True
        if nbytes <= HOST_SHARE * self.host_room:
            return "cpu", False
        raise UsageError(
            f"{self.what} saves the state the runs change ({fmt_bytes(nbytes)}) to put it back "
            f"afterwards, but neither the GPU ({fmt_bytes(self.gpu_room)} left) nor the host "
            f"({fmt_bytes(self.host_room)} available) has room for it: measure a smaller "
            "model (fewer layers), then apply what you learn to this one."
        )

    def _copy(self, t: torch.Tensor) -> torch.Tensor:
        import torch

        t = t.detach()
        if self.where == "cpu" and t.is_cuda:
            out = torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=self.pinned)
            out.copy_(t, non_blocking=self.pinned)
            return out
        return t.clone()

    def _save_tensor(self, label: str, t: torch.Tensor, owner: str, *, grad: bool) -> None:
        """Save a tensor's value; with ``grad``, a leaf's gradient and hook tables too."""
        self._saved_ids.add(id(t))
        self.tensors.append(_Tensor(label, t, self._copy(t), t.device, bool(t.requires_grad)))
        if grad and t.is_leaf:
            g = t.grad
            self.grads.append(_Grad(f"{label}.grad", t, None if g is None else self._copy(g)))
            if t.requires_grad:
                self.tensor_hooks.append(SavedTensorHooks(owner, t))

    def _save_module(self, name: str, model: torch.nn.Module) -> None:
        import torch

        for sub_name, sub in model.named_modules(remove_duplicate=False):
            if id(sub) in self._module_ids:
                continue
            self._module_ids.add(id(sub))
            prefix = f"{name}.{sub_name}" if sub_name else name
            self.structures.append(SavedStructure(name, sub))
            for key, t in [*sub._parameters.items(), *sub._buffers.items()]:
                if t is not None and id(t) not in self._saved_ids:
                    self._save_tensor(f"{prefix}.{key}", t, name, grad=True)
            for key, attr in vars(sub).items():
                if isinstance(attr, torch.Tensor) and id(attr) not in self._saved_ids:
                    self._save_tensor(f"{prefix}.{key}", attr, name, grad=False)

    def save_also(self, label: str, module: object) -> None:
        """Save a module made after this state was (see ``RepeatedRuns.save_also``)."""
        import torch

        if isinstance(module, torch.nn.Module):
            self._save_module(label, module)

    def _save_optimizer(self, label: str, opt: torch.optim.Optimizer) -> _Optimizer:
        import torch

        params = [p for g in opt.param_groups for p in g["params"]]
        outside = 0
        for i, param in enumerate(params):
            if id(param) not in self._saved_ids:  # stepped, but in no named model
                self._save_tensor(f"{label}'s parameter {i}", param, label, grad=True)
                outside += 1
        saved = _Optimizer(
            label,
            opt,
            [
                (g, {k: self._value(v) for k, v in g.items() if k != "params"}, list(g["params"]))
                for g in opt.param_groups
            ],
            {},
            params,
            SavedStructure(label, opt, skip=("state",)),
            outside,
        )
        for i, param in enumerate(params):
            if param in opt.state:
                saved.state[i] = {}
                for k, v in opt.state[param].items():
                    if isinstance(v, torch.Tensor):
                        saved.devices[(i, k)] = v.device
                    saved.state[i][k] = self._value(v)
        return saved

    def _value(self, v: Any) -> Any:
        import torch

        return self._copy(v) if isinstance(v, torch.Tensor) else copy.deepcopy(v)

    def _save_reached(self) -> None:
        import torch

        r = self.reached
        for label, t in r.tensors.items():
            if isinstance(t, torch.Tensor):
                if id(t) in self._saved_ids:
                    continue
                self._save_tensor(label, t, label, grad=t.is_leaf)
                if t.is_leaf and (t.requires_grad or t.grad is not None):
                    self._reached_grads.append(label)
            else:  # a NumPy array
                self.tensors.append(_Tensor(label, t, t.copy()))
        self.containers = []
        for label, c in r.containers.items():
            if isinstance(c, dict):
                content: Any = dict(c)
            elif isinstance(c, list | bytearray):
                content = c[:]
            elif isinstance(c, set):
                content = set(c)
            else:
                content = dict(vars(c))
            self.containers.append((label, c, content))
        self.generators = [(label, g, _generator_state(g)) for label, g in r.generators.items()]
        self.bindings = [(ns, name, ns.get(name, _MISSING)) for ns, name in r.bindings]
        self.cells = [(cell, _cell_contents(cell)) for cell in r.cells]

    def _save_state_dicts(self, state_dicts: dict[str, tuple[Any, Any]]) -> list[SavedStateDict]:
        out = []
        for label, (obj, state_dict) in state_dicts.items():
            try:
                out.append(SavedStateDict(label, obj, save_tree(state_dict, self._copy)))
            except CannotCopy as exc:
                self.unsaved.append(Problem(label, f"its state_dict holds {exc}"))
        return out

    def _save_rng(self) -> dict[str, Any]:
        import torch

        rng: dict[str, Any] = {"torch": torch.get_rng_state(), "random": random.getstate()}
        if self.cuda_devices:
            rng["cuda"] = torch.cuda.get_rng_state_all()
        np = sys.modules.get("numpy")
        if np is not None:
            rng["numpy"] = np.random.get_state()
        return rng

    def _peaks(self) -> dict[int, dict[str, int]]:
        import torch

        return {
            d: {k: int(v) for k, v in torch.cuda.memory_stats(d).items() if k.endswith(".peak")}
            for d in self.cuda_devices
        }

    # ---------------------------------------------------------------- restoring

    def restore(self) -> None:
        """Put everything saved back, in place (what the runs had changed is noted)."""
        import torch

        self._note(self.settings.restore())
        for structure in self.structures:
            self._note(f"{structure.label}'s {word}" for word in structure.differences())
            structure.restore()
        for opt in self.optimizer_states:
            self._note(f"{opt.label}'s {word}" for word in opt.structure.differences())
            opt.structure.restore()
        for hooks in self.tensor_hooks:
            if hooks.changed():
                self._note([f"{hooks.label}'s hooks"])
            hooks.restore()
        with torch.no_grad():
            for t in self.tensors:
                if isinstance(t.live, torch.Tensor) and t.live.is_inference():
                    with torch.inference_mode():  # the only mode that may write one
                        self._restore_tensor(t)
                else:
                    self._restore_tensor(t)
            for g in self.grads:
                self._restore_grad(g)
            for opt in self.optimizer_states:
                self._restore_optimizer(opt)
        for saved in self.stateful:
            try:
                saved.restore()
            except Exception as exc:  # noqa: BLE001  # said in the report as not put back
                self._failed.append(f"{saved.label} (load_state_dict: {type(exc).__name__})")
        for _label, c, content in self.containers:
            if isinstance(c, dict | set):
                c.clear()
                c.update(content)
            elif isinstance(c, list | bytearray):
                c[:] = content
            else:
                vars(c).clear()
                vars(c).update(content)
        for _label, g, state in self.generators:
            _set_generator_state(g, state)
        for ns, name, value in self.bindings:
            if value is _MISSING:
                ns.pop(name, None)
            else:
                ns[name] = value
        for cell, value in self.cells:
            if value is _MISSING:
                with contextlib.suppress(ValueError):
                    del cell.cell_contents
            else:
                cell.cell_contents = value
        self._restore_rng()

    def _note(self, words: Any) -> None:
        for word in words:
            if word not in self.changed:
                self.changed.append(word)

    def _restore_tensor(self, t: _Tensor) -> None:
        import torch

        if not isinstance(t.live, torch.Tensor):  # a NumPy array
            if t.live.shape == t.saved.shape:
                t.live[...] = t.saved
            return
        if _same_layout(t.live, t.saved, t.device):
            t.live.copy_(t.saved)
        else:  # the run replaced its data (``p.data = ...``): give it back its own
            t.live.data = t.saved.to(t.device, copy=True)
        if t.live.is_leaf and t.live.requires_grad != t.requires_grad:
            t.live.requires_grad_(t.requires_grad)

    @staticmethod
    def _restore_grad(g: _Grad) -> None:
        tensor, saved = g.tensor, g.saved
        if saved is None:
            tensor.grad = None
        elif tensor.grad is not None and _same_layout(tensor.grad, saved, tensor.device):
            tensor.grad.copy_(saved)
        else:
            tensor.grad = saved.to(tensor.device, copy=True)

    def _restore_optimizer(self, saved: _Optimizer) -> None:
        import torch

        opt = saved.optimizer
        opt.param_groups[:] = [g for g, _, _ in saved.groups]
        for group, values, params in saved.groups:
            live = {k: group.get(k) for k in values}
            group.clear()
            for key, value in values.items():
                current = live.get(key)
                if (
                    isinstance(value, torch.Tensor)
                    and isinstance(current, torch.Tensor)
                    and _same_layout(current, value)
                ):
                    current.copy_(value)
                    group[key] = current
                    continue
                group[key] = (
                    self._value(value) if isinstance(value, torch.Tensor) else copy.deepcopy(value)
                )
            group["params"] = params
        for i, param in enumerate(saved.params):
            old = saved.state.get(i)
            if old is None:
                opt.state.pop(param, None)  # the optimizer had not stepped this parameter
                continue
            live_state = opt.state.get(param)
            same = live_state is not None and live_state.keys() == old.keys()
            new: dict[str, Any] = {}
            for key, value in old.items():
                current = live_state.get(key) if same and live_state is not None else None
                if isinstance(value, torch.Tensor):
                    device = saved.devices.get((i, key), value.device)
                    if isinstance(current, torch.Tensor) and _same_layout(current, value, device):
                        current.copy_(value)  # in place: the optimizer keeps its own tensors
                        new[key] = current
                    else:
                        new[key] = value.to(device, copy=True)
                else:
                    new[key] = copy.deepcopy(value)
            opt.state[param] = new
        for param in list(opt.state):
            if all(param is not p for p in saved.params):
                opt.state.pop(param, None)

    def _restore_rng(self) -> None:
        import torch

        torch.set_rng_state(self.rng["torch"])
        random.setstate(self.rng["random"])
        if "cuda" in self.rng:
            torch.cuda.set_rng_state_all(self.rng["cuda"])
        elif cuda_in_use():
            # the runs started CUDA: its generators are back at their first state, as if the
            # runs had not drawn from them
            for gen in torch.cuda.default_generators:
                gen.manual_seed(gen.initial_seed())
        np = sys.modules.get("numpy")
        if np is not None and "numpy" in self.rng:
            np.random.set_state(self.rng["numpy"])

    # ---------------------------------------------------------------- checking

    def mismatches(self) -> list[str]:
        """What differs from its saved copy after :meth:`restore` (labels)."""
        return self.check().mismatched

    def check(self) -> StateCheck:
        """Compare everything saved with what is live now (after :meth:`restore`)."""
        bad: list[str] = list(self._failed)
        uncompared: dict[str, str] = {}
        bad += self._check_tensors()
        for opt in self.optimizer_states:
            bad += self._check_optimizer(opt, uncompared)
        for structure in self.structures:
            bad += [f"{structure.label}'s {w}" for w in structure.differences()]
        bad += [f"{h.label}'s hooks" for h in self.tensor_hooks if h.changed()]
        for saved in self.stateful:
            same = saved.check()
            if same is False:
                bad.append(f"{saved.label} (state_dict)")
            elif same is None:
                uncompared[saved.label] = "its state_dict holds objects it cannot compare"
        bad += self._check_reached()
        bad += self._check_rng()
        bad += list(self.settings.failed) + self.settings.mismatches()
        return StateCheck(list(dict.fromkeys(bad)), uncompared)

    def _check_tensors(self) -> list[str]:
        import torch

        bad: list[str] = []
        for g in self.grads:
            grad = g.tensor.grad
            if (grad is None) != (g.saved is None) or (
                grad is not None and g.saved is not None and not bitwise_equal(grad, g.saved)
            ):
                bad.append(g.label)
        for t in self.tensors:
            if isinstance(t.live, torch.Tensor):
                if not bitwise_equal(t.live, t.saved) or (
                    t.live.is_leaf and t.live.requires_grad != t.requires_grad
                ):
                    bad.append(t.label)
            elif t.live.shape != t.saved.shape or t.live.tobytes() != t.saved.tobytes():
                bad.append(t.label)
        return bad

    def _check_optimizer(self, opt: _Optimizer, uncompared: dict[str, str]) -> list[str]:
        import torch

        bad = [f"{opt.label}'s {w}" for w in opt.structure.differences()]
        live_groups = opt.optimizer.param_groups
        if len(live_groups) != len(opt.groups) or any(
            a is not b for a, (b, _, _) in zip(live_groups, opt.groups, strict=False)
        ):
            bad.append(f"{opt.label}.param_groups")
        for i, (group, values, params) in enumerate(opt.groups):
            live_params = group.get("params", [])
            if len(live_params) != len(params) or any(
                a is not b for a, b in zip(live_params, params, strict=False)
            ):
                bad.append(f"{opt.label}.param_groups[{i}]['params']")
            for key, value in values.items():
                same = same_value(group.get(key, _MISSING), value)
                if same is False:
                    bad.append(f"{opt.label}.param_groups[{i}][{key!r}]")
                elif same is None:
                    uncompared[opt.label] = f"its param_groups hold a {type(value).__name__}"
        for i, param in enumerate(opt.params):
            old = opt.state.get(i, {})
            live = opt.optimizer.state.get(param, {})
            if i not in opt.state and param in opt.optimizer.state:
                bad.append(f"{opt.label}.state[{i}]")
            for key, value in old.items():
                current = live.get(key, _MISSING)
                if isinstance(value, torch.Tensor):
                    kept: bool | None = isinstance(current, torch.Tensor) and bitwise_equal(
                        current, value
                    )
                else:
                    kept = same_value(current, value)
                if kept is False:
                    bad.append(f"{opt.label}.state[{i}][{key!r}]")
                elif kept is None:
                    uncompared[opt.label] = f"its state holds a {type(value).__name__}"
        return bad

    def _check_reached(self) -> list[str]:
        bad: list[str] = []
        for label, c, content in self.containers:
            if isinstance(c, dict):
                same = c.keys() == content.keys() and all(c[k] is v for k, v in content.items())
            elif isinstance(c, list):
                same = len(c) == len(content) and all(
                    a is b for a, b in zip(c, content, strict=True)
                )
            elif isinstance(c, bytearray | set):
                same = c == content
            else:
                live = vars(c)
                same = live.keys() == content.keys() and all(
                    live[k] is v for k, v in content.items()
                )
            if not same:
                bad.append(label)
        for label, g, state in self.generators:
            if not same_value(_generator_state(g), state):
                bad.append(label)
        for ns, name, value in self.bindings:
            if ns.get(name, _MISSING) is not value:
                bad.append(name)
        for cell, value in self.cells:
            if _cell_contents(cell) is not value:
                bad.append("a closure variable")
        return bad

    def _check_rng(self) -> list[str]:
        import torch

        same = bitwise_equal(torch.get_rng_state(), self.rng["torch"]) and same_value(
            random.getstate(), self.rng["random"]
        )
        if "cuda" in self.rng:
            now = torch.cuda.get_rng_state_all()
            same = same and all(
                bitwise_equal(a, b) for a, b in zip(now, self.rng["cuda"], strict=True)
            )
        np = sys.modules.get("numpy")
        if np is not None and "numpy" in self.rng:
            same = same and bool(same_value(np.random.get_state(), self.rng["numpy"]))
        return [] if same else ["the RNG"]

    def peak_changes(self) -> dict[int, tuple[int, int]]:
        """Per CUDA device whose allocated peak moved: (before, now)."""
        import torch

        out: dict[int, tuple[int, int]] = {}
        for d, before in self.peaks.items():
            now = int(torch.cuda.memory_stats(d).get("allocated_bytes.all.peak", 0))
            was = before.get("allocated_bytes.all.peak", 0)
            if now != was:
                out[d] = (was, now)
        return out

    # ---------------------------------------------------------------- what it holds

    def parts(self, check: StateCheck) -> list[RestoredPart]:
        """Everything saved and put back, in the report's order, and whether it was compared."""
        out = [RestoredPart(name, "model") for name in self.models]
        models = " and ".join(self.models)
        for opt in self.optimizer_states:
            detail = ""
            if opt.outside:
                where = f" outside {models}" if models else ""
                detail = f"and its {opt.outside} parameter(s){where}"
            out.append(self._part(opt.label, "optimizer", check, detail))
        out += [RestoredPart(label, "module") for label in self.reached.modules]
        out += [self._part(s.label, "state_dict", check, "state_dict") for s in self.stateful]
        grads = set(self._reached_grads)
        for t in self.tensors:
            if t.label in self.reached.tensors:
                out.append(RestoredPart(t.label, "tensor"))
                if t.label in grads:
                    out.append(RestoredPart(f"{t.label}.grad", "gradient"))
        out += [RestoredPart(label, "container") for label, _, _ in self.containers]
        out += [RestoredPart(label, "generator") for label, _, _ in self.generators]
        shown = {p.label for p in out}
        out += [RestoredPart(n, "binding") for _, n, _ in self.bindings if n not in shown]
        if self.cells:
            out.append(RestoredPart(f"{len(self.cells)} closure variable(s)", "closure"))
        out.append(RestoredPart("the RNG", "rng"))
        out += [RestoredPart(name, "setting") for name in self.settings.names]
        return out

    @staticmethod
    def _part(label: str, kind: str, check: StateCheck, detail: str) -> RestoredPart:
        why = check.uncompared.get(label)
        if why is not None:
            return RestoredPart(label, kind, compared=False, detail=why)
        return RestoredPart(label, kind, detail=detail)

    def release(self) -> None:
        """Drop the saved copy (and the pinned host memory torch's allocator would keep)."""
        self.tensors = []
        self.grads = []
        self.optimizer_states = []
        self.stateful = []
        if self.pinned:
            import torch

            empty = getattr(torch._C, "_host_emptyCache", None)
            if empty is not None:
                import gc

                gc.collect()
                empty()

    def describe_place(self) -> str:
        """Where the copy was kept, when that is worth a sentence ("" on the GPU or CPU)."""
        if self.where == "cpu":
            kind = "pinned host memory" if self.pinned else "host memory"
            return (
                f"The saved state ({fmt_bytes(self.saved_bytes)}) was kept in {kind}: beside "
                "the most this process's allocator has reserved, the GPU had "
                f"{fmt_bytes(self.gpu_room)} left, too little for a copy beside the runs. "
                "Putting it back costs a host-to-device copy."
            )
        return ""


def room_beside_the_runs(free_bytes: int, reserved_bytes: int, peak_reserved_bytes: int) -> int:
    """Bytes of GPU memory a copy may take and still leave the runs what they have needed.

    The runs may need as much as this process's allocator has ever reserved
    (``torch.cuda.max_memory_reserved``: activations, workspaces and the fragmentation between
    them, which the allocated peak leaves out; reading it resets nothing). What it holds
    reserved now it keeps; to reach its peak again it would take ``peak - reserved`` more of the
    device's free memory. The rest of the free memory is the copy's room. Free plus cached was
    not: on the H200, notebook 07's copy (4.6 GiB) went to the GPU by that measure after a step
    at batch 93, and the next steps ran out of memory with 12.3 GiB reserved but unallocated.
    """
    return max(0, free_bytes - max(0, peak_reserved_bytes - reserved_bytes))


def _same_layout(
    live: torch.Tensor, saved: torch.Tensor, device: torch.device | None = None
) -> bool:
    return bool(
        live.shape == saved.shape
        and live.dtype == saved.dtype
        and (device is None or live.device == device)
    )


def _generator_state(g: Any) -> Any:
    if isinstance(g, random.Random):
        return g.getstate()
    if hasattr(g, "get_state") and not hasattr(g, "bit_generator"):
        return g.get_state()  # torch.Generator, NumPy's RandomState
    return copy.deepcopy(g.bit_generator.state)  # NumPy's Generator


def _set_generator_state(g: Any, state: Any) -> None:
    if isinstance(g, random.Random):
        g.setstate(state)
    elif hasattr(g, "set_state") and not hasattr(g, "bit_generator"):
        g.set_state(state)
    else:
        g.bit_generator.state = state


def _cell_contents(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return _MISSING
