"""A copy of everything repeated runs may change, put back in place afterwards, bit for bit.

What is saved (see ``common/reach.py`` for how the reached objects are found):

- each named model, submodule by submodule: its parameters and buffers (the objects, their
  values and ``requires_grad``), their gradients, plain tensor attributes, ``training``;
- each named optimizer: its per-parameter state and its param_groups (every value but the
  parameters, which stay the same objects);
- the tensors, arrays, containers, generators, name bindings and closure cells the code
  reaches;
- the RNG: torch's CPU generator and every CUDA device's, Python's ``random``, NumPy's global
  one; grad mode;
- the CUDA allocator's peak counters (``memory_stats``' ``*.peak``), to check afterwards. torch
  has no way to set a peak counter: ``reset_peak_memory_stats`` sets it to the memory in use
  now. So the counters are never reset here: when the runs stay within the peak that was there
  before, they end as they were; when a run went higher, the counter keeps that run's peak and
  the report says so.

Where the copy lives is decided before copying: on the GPU when it fits well within the memory
the GPU has left, else on the host (pinned while that fits), so a model sized to the GPU does
not run out of memory. ``restore`` copies the saved values back into the live tensors, in place
(a tensor whose shape, dtype or device was changed gets its data back), so no second copy is
made on the GPU; objects the runs replaced are put back too.
"""

from __future__ import annotations

import contextlib
import copy
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from IPython.core.error import UsageError

from .lazy_torch import torch_module
from .reach import Reached
from .render import fmt_bytes

#: Keep the copy on the GPU only while it takes at most this share of the memory the GPU has
#: left (the runs still need theirs); on the host, pinned up to this share of the available
#: RAM, pageable above it, and at most the last share.
GPU_SHARE = 0.4
PINNED_SHARE = 0.6
HOST_SHARE = 0.85
_MISSING = object()


@dataclass
class _Tensor:
    """One live tensor (or NumPy array) and its saved value."""

    label: str
    live: Any
    saved: Any
    device: Any = None
    requires_grad: bool = False


@dataclass
class _Module:
    """One submodule: its parameter, buffer and tensor-attribute objects, and ``training``."""

    module: Any
    training: bool
    parameters: dict[str, Any]
    buffers: dict[str, Any]


@dataclass
class _Optimizer:
    label: str
    optimizer: Any
    groups: list[tuple[dict[str, Any], dict[str, Any], list[Any]]]
    state: dict[int, dict[str, Any]]  # index of the parameter -> its state, values saved
    params: list[Any]
    devices: dict[tuple[int, str], Any] = field(default_factory=dict)


def _tensors_of(value: Any, torch: Any) -> Iterator[Any]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors_of(v, torch)


class SavedState:
    """What the runs may change, saved before them (see the module doc).

    Raises:
        UsageError: neither the GPU nor the host has room for the copy; ``what`` names the
            magic in the message.
    """

    def __init__(
        self,
        models: dict[str, Any],
        optimizers: dict[str, Any],
        reached: Reached | None = None,
        *,
        what: str = "the magic",
    ) -> None:
        torch = torch_module()
        self.torch = torch
        self.what = what
        self.models = models
        self.optimizers = optimizers
        self.reached = reached or Reached()
        self.gpu_room = self.host_room = 0
        live = self._live_tensors()
        self.saved_bytes = sum(int(t.numel() * t.element_size()) for t in live if t.is_cuda)
        self.where, self.pinned = self._place(self.saved_bytes)
        self.tensors: list[_Tensor] = []
        #: (label, parameter, its saved gradient or None)
        self.grads: list[tuple[str, Any, Any]] = []
        self.modules: list[_Module] = []
        self._save_models()
        self.optimizer_states = [self._save_optimizer(n, o) for n, o in optimizers.items()]
        self._save_reached()
        if self.where == "cpu":
            torch.cuda.synchronize()  # the non-blocking copies to pinned memory are done
        self.cuda_devices = (
            list(range(torch.cuda.device_count()))
            if torch.cuda.is_available() and torch.cuda.is_initialized()
            else []
        )
        self.rng = self._save_rng()
        self.grad_enabled = torch.is_grad_enabled()
        self.peaks = self._peaks()

    # ---------------------------------------------------------------- what to save

    def _live_tensors(self) -> list[Any]:
        torch = self.torch
        out: list[Any] = []
        for model in self.models.values():
            for t in [*model.parameters(), *model.buffers()]:
                out.append(t)
                if t.grad is not None:
                    out.append(t.grad)
        for opt in self.optimizers.values():
            for state in opt.state.values():
                out += list(_tensors_of(state, torch))
        out += [t for t in self.reached.tensors.values() if isinstance(t, torch.Tensor)]
        return out

    def _place(self, nbytes: int) -> tuple[str, bool]:
        """("cuda" or "cpu", pinned): where a copy of ``nbytes`` of GPU tensors fits."""
        torch = self.torch
        if nbytes == 0 or not (torch.cuda.is_available() and torch.cuda.is_initialized()):
            return "same", False
        free, _ = torch.cuda.mem_get_info()
        cached = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
        self.gpu_room = int(free + cached)
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

    def _copy(self, t: Any) -> Any:
        t = t.detach()
        if self.where == "cpu" and t.is_cuda:
            out = self.torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=self.pinned)
            out.copy_(t, non_blocking=self.pinned)
            return out
        return t.clone()

    def _tensor(self, label: str, t: Any) -> _Tensor:
        return _Tensor(label, t, self._copy(t), t.device, bool(t.requires_grad))

    def _save_models(self) -> None:
        seen: set[int] = set()
        for name, model in self.models.items():
            for sub_name, sub in model.named_modules(remove_duplicate=False):
                if id(sub) in seen:
                    continue
                seen.add(id(sub))
                prefix = f"{name}.{sub_name}" if sub_name else name
                self.modules.append(
                    _Module(sub, bool(sub.training), dict(sub._parameters), dict(sub._buffers))
                )
                for key, t in [*sub._parameters.items(), *sub._buffers.items()]:
                    if t is None or id(t) in seen:
                        continue
                    seen.add(id(t))
                    self.tensors.append(self._tensor(f"{prefix}.{key}", t))
                    grad = t.grad
                    self.grads.append(
                        (f"{prefix}.{key}.grad", t, None if grad is None else self._copy(grad))
                    )
                for key, attr in vars(sub).items():
                    if isinstance(attr, self.torch.Tensor) and id(attr) not in seen:
                        seen.add(id(attr))
                        self.tensors.append(self._tensor(f"{prefix}.{key}", attr))

    def _save_optimizer(self, label: str, opt: Any) -> _Optimizer:
        torch = self.torch
        params = [p for g in opt.param_groups for p in g["params"]]
        saved = _Optimizer(
            label,
            opt,
            [
                (g, {k: self._value(v) for k, v in g.items() if k != "params"}, list(g["params"]))
                for g in opt.param_groups
            ],
            {},
            params,
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
        return self._copy(v) if isinstance(v, self.torch.Tensor) else copy.deepcopy(v)

    def _save_reached(self) -> None:
        torch, r = self.torch, self.reached
        for label, t in r.tensors.items():
            if isinstance(t, torch.Tensor):
                self.tensors.append(self._tensor(label, t))
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
        self.stateful = [(obj, self._attributes(obj)) for obj in r.stateful.values()]
        self.bindings = [(ns, name, ns.get(name, _MISSING)) for ns, name in r.bindings]
        self.cells = [(cell, _cell_contents(cell)) for cell in r.cells]

    def _attributes(self, obj: Any) -> dict[str, Any]:
        """A deep copy of an object's attributes (tensors cloned), to set back as they were."""
        return {k: self._value(v) for k, v in vars(obj).items()}

    def _save_rng(self) -> dict[str, Any]:
        torch = self.torch
        rng: dict[str, Any] = {"torch": torch.get_rng_state(), "random": random.getstate()}
        if self.cuda_devices:
            rng["cuda"] = torch.cuda.get_rng_state_all()
        np = sys.modules.get("numpy")
        if np is not None:
            rng["numpy"] = np.random.get_state()
        return rng

    def _peaks(self) -> dict[int, dict[str, int]]:
        torch = self.torch
        return {
            d: {k: int(v) for k, v in torch.cuda.memory_stats(d).items() if k.endswith(".peak")}
            for d in self.cuda_devices
        }

    # ---------------------------------------------------------------- restoring

    def restore(self) -> None:
        """Put everything saved back, in place."""
        torch = self.torch
        with torch.no_grad():
            for m in self.modules:
                m.module.training = m.training
                for table, saved in (
                    (m.module._parameters, m.parameters),
                    (m.module._buffers, m.buffers),
                ):
                    if table.keys() != saved.keys() or any(
                        table[k] is not v for k, v in saved.items()
                    ):
                        table.clear()
                        table.update(saved)
            for t in self.tensors:
                if isinstance(t.live, torch.Tensor) and t.live.is_inference():
                    with torch.inference_mode():  # the only mode that may write one
                        self._restore_tensor(t)
                else:
                    self._restore_tensor(t)
            for _label, param, grad in self.grads:
                if grad is None:
                    param.grad = None
                elif param.grad is not None and _same_layout(param.grad, grad, param.device):
                    param.grad.copy_(grad)
                else:
                    param.grad = grad.to(param.device, copy=True)
            for opt in self.optimizer_states:
                self._restore_optimizer(opt)
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
        for obj, attributes in self.stateful:
            live = vars(obj)
            for key in [k for k in live if k not in attributes]:
                del live[key]
            for key, value in attributes.items():
                current = live.get(key)
                if (
                    isinstance(value, self.torch.Tensor)
                    and isinstance(current, self.torch.Tensor)
                    and _same_layout(current, value)
                ):
                    current.copy_(value)  # in place: whoever holds it sees the old value
                else:
                    live[key] = self._value(value)
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
        torch.set_grad_enabled(self.grad_enabled)

    def _restore_tensor(self, t: _Tensor) -> None:
        torch = self.torch
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

    def _restore_optimizer(self, saved: _Optimizer) -> None:
        torch, opt = self.torch, saved.optimizer
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
        torch = self.torch
        torch.set_rng_state(self.rng["torch"])
        random.setstate(self.rng["random"])
        if "cuda" in self.rng:
            torch.cuda.set_rng_state_all(self.rng["cuda"])
        elif torch.cuda.is_available() and torch.cuda.is_initialized():
            # the runs started CUDA: its generators are back at their first state, as if the
            # runs had not drawn from them
            for gen in torch.cuda.default_generators:
                gen.manual_seed(gen.initial_seed())
        np = sys.modules.get("numpy")
        if np is not None and "numpy" in self.rng:
            np.random.set_state(self.rng["numpy"])

    # ---------------------------------------------------------------- checking

    def mismatches(self) -> list[str]:
        """The saved tensors whose live value differs from the copy, bit for bit (labels)."""
        torch = self.torch
        bad: list[str] = []
        for label, param, saved in self.grads:
            grad = param.grad
            if (grad is None) != (saved is None) or (
                grad is not None and not bitwise_equal(grad, saved)
            ):
                bad.append(label)
        for t in self.tensors:
            if isinstance(t.live, torch.Tensor):
                if not bitwise_equal(t.live, t.saved):
                    bad.append(t.label)
            elif t.live.shape != t.saved.shape or t.live.tobytes() != t.saved.tobytes():
                bad.append(t.label)
        for opt in self.optimizer_states:
            for i, param in enumerate(opt.params):
                old = opt.state.get(i, {})
                live = opt.optimizer.state.get(param, {})
                for key, value in old.items():
                    current = live.get(key)
                    if isinstance(value, torch.Tensor) and (
                        not isinstance(current, torch.Tensor) or not bitwise_equal(current, value)
                    ):
                        bad.append(f"{opt.label}.state[{i}][{key!r}]")
        return bad

    def peak_changes(self) -> dict[int, tuple[int, int]]:
        """Per CUDA device whose allocated peak moved: (before, now)."""
        torch = self.torch
        out: dict[int, tuple[int, int]] = {}
        for d, before in self.peaks.items():
            now = int(torch.cuda.memory_stats(d).get("allocated_bytes.all.peak", 0))
            was = before.get("allocated_bytes.all.peak", 0)
            if now != was:
                out[d] = (was, now)
        return out

    def counts(self) -> dict[str, int]:
        """How many of each kind were saved, for the report's one line."""
        return {
            "tensors": len(self.tensors),
            "grads": sum(1 for _, _, g in self.grads if g is not None),
            "optimizers": len(self.optimizer_states),
        }

    def release(self) -> None:
        """Drop the saved copy (and the pinned host memory torch's allocator would keep)."""
        self.tensors = []
        self.grads = []
        self.optimizer_states = []
        if self.pinned:
            empty = getattr(self.torch._C, "_host_emptyCache", None)
            if empty is not None:
                import gc

                gc.collect()
                empty()

    def describe_place(self) -> str:
        """Where the copy was kept, when that is worth a sentence ("" on the GPU or CPU)."""
        if self.where == "cpu":
            kind = "pinned host memory" if self.pinned else "host memory"
            return (
                f"The saved state ({fmt_bytes(self.saved_bytes)}) was kept in {kind}: the GPU "
                f"had {fmt_bytes(self.gpu_room)} left, too little for a copy beside the runs. "
                "Putting it back costs a host-to-device copy."
            )
        return ""


def _same_layout(live: Any, saved: Any, device: Any = None) -> bool:
    return bool(
        live.shape == saved.shape
        and live.dtype == saved.dtype
        and (device is None or live.device == device)
    )


def bitwise_equal(a: Any, b: Any) -> bool:
    """Whether two tensors hold the same bits (NaNs included), wherever they live."""
    torch = torch_module()
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.device != b.device:
        b = b.to(a.device)
    if a.dtype == torch.bool or not (a.is_floating_point() or a.is_complex()):
        return bool(torch.equal(a, b))
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return bool(torch.equal(a.contiguous().view(ints), b.contiguous().view(ints)))


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
