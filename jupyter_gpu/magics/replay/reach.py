"""What user code can reach, read from its bytecode before it runs.

A magic that runs an expression or a cell again and again (``replay/runs.py``) must put back
everything the runs change, or say before the first run that it cannot. This module reads the
code (``dis``) and follows it: the names it loads and stores, the functions it calls that are
the user's own (cells and the user's modules; a library's code is not followed, but the objects
its closures, defaults and bound methods hold are), the methods and hooks of the user's modules,
closures and default arguments. Every object found is sorted into:

- **state the magic restores**: the named models and optimizers (every parameter the
  optimizers step, in a named model or not); other modules whose tensors those hold (their
  hooks and submodules); tensors and NumPy arrays (values put back in place, a leaf's gradient
  too); objects with ``state_dict``/``load_state_dict`` (LR schedulers, ``GradScaler``, EMA
  helpers: through those); dicts, lists and plain objects (their items put back); objects of
  the user's own classes whose methods the code calls (``trainer.step()``: their ``__dict__``
  put back, the methods followed, their stores on ``self`` allowed); random
  generators (their state); names the code rebinds (``global x``, a cell's assignments);
  closure cells it writes (``nonlocal``); ``os.environ`` and ``sys.path`` where the code
  touches them (the other process-wide settings are always saved: ``settings.py``);
- **harmless**: Python and torch modules, numbers, strings, dtypes, classes, library functions,
  loggers (their levels are saved with the settings; what they write is output, as ``print``);
- **problems**, each one phrase that says what cannot be put back: a model with tensors of its
  own or an optimizer that is not named, an iterator (each run draws the next item), an object
  it cannot look into, an attribute set on an object (``self.count += 1``), a call by a name
  that writes files (``open``, ``.save``, ``.write``...), changes a process-wide setting that
  torch gives no way to read back (``set_flush_denormal``) or resets the peak memory counters.

Limits (also in docs/magics.md): the reading is by name and by what the code holds, not a proof.
Attribute calls are judged by their name (``.save`` is assumed to write a file, a ``.write``
on an in-memory buffer too); code run from inside a library (a callback passed to a library
function that is not a name the code loads, C extensions) and objects reached only through a
library's return values are not seen; ``exec``, ``eval`` and ``globals()`` are refused rather
than followed.
"""

from __future__ import annotations

import dis
import enum
import functools
import logging
import os
import random
import sys
import types
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from jupyter_gpu.magics.shell.args import lookup_model, lookup_optimizer
from jupyter_gpu.magics.shell.lazy_torch import holds_no_memory
from jupyter_gpu.magics.shell.origin import is_library_file

if TYPE_CHECKING:
    import torch

_GLOBAL_LOADS = frozenset(("LOAD_GLOBAL", "LOAD_NAME"))
_GLOBAL_STORES = frozenset(("STORE_GLOBAL", "STORE_NAME", "DELETE_GLOBAL", "DELETE_NAME"))
_ATTR_LOADS = frozenset(("LOAD_ATTR", "LOAD_METHOD", "LOAD_SUPER_ATTR"))
_ATTR_STORES = frozenset(("STORE_ATTR", "DELETE_ATTR"))
_DEREF_LOADS = frozenset(("LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF"))
_DEREF_STORES = frozenset(("STORE_DEREF", "DELETE_DEREF"))

#: Attribute calls that, by their name, write or delete files.
FILE_WRITERS = frozenset(
    (
        "save",
        "save_pretrained",
        "save_model",
        "save_checkpoint",
        "write",
        "writelines",
        "write_text",
        "write_bytes",
        "dump",
        "savez",
        "savez_compressed",
        "savetxt",
        "tofile",
        "to_csv",
        "to_parquet",
        "to_pickle",
        "savefig",
        "mkdir",
        "makedirs",
        "remove",
        "unlink",
        "rmdir",
        "rmtree",
        "rename",
        "touch",
        "export_chrome_trace",
        "add_scalar",
        "add_scalars",
    )
)
#: Calls that change a process-wide setting that cannot be read back, so not put back: torch
#: has no getter for denormal flushing or the legacy tensor type, the interop thread count can
#: be set once only, and the memory fraction has no reader in every supported torch. (The
#: settings that can be read back are saved and put back: ``settings.py``.)
GLOBAL_SETTERS = frozenset(
    (
        "set_default_tensor_type",
        "set_num_interop_threads",
        "set_per_process_memory_fraction",
        "set_flush_denormal",
    )
)
#: Calls that reset torch's memory counters (the magic checks them after the runs).
PEAK_RESETTERS = frozenset(
    (
        "reset_peak_memory_stats",
        "reset_max_memory_allocated",
        "reset_max_memory_cached",
        "reset_accumulated_memory_stats",
    )
)
#: Builtins whose effects cannot be followed, or that open files.
_BUILTIN_PROBLEMS = {
    "open": "calls open(), which may write a file",
    "exec": "calls exec(), whose code it cannot follow",
    "eval": "calls eval(), whose code it cannot follow",
    "compile": "calls compile(), whose code it cannot follow",
    "globals": "uses globals(), through which any name may change",
    "vars": "uses vars(), through which any attribute may change",
    "locals": "uses locals(), through which any name may change",
    "setattr": "calls setattr(), which sets an attribute it cannot follow",
    "delattr": "calls delattr(), which removes an attribute it cannot follow",
    "__import__": "calls __import__(), whose code it cannot follow",
}
#: Functions in which setting attributes builds a new object rather than changing one.
_BUILDERS = frozenset(("__init__", "__new__", "__post_init__", "__init_subclass__"))
#: Which attribute stores in followed code are no problem: none (""), any ("any": a method of
#: an object saved through its state_dict, which holds what they set), or those on the method's
#: own ``self`` ("self": a method of an object of the user's own class, whose __dict__ is
#: put back).
_Stores = Literal["", "any", "self"]
#: Classes that define one of these compute their attributes: they are not read like data.
_ATTRIBUTE_HOOKS = frozenset(
    ("__getattr__", "__getattribute__", "__setattr__", "__delattr__", "__slots__")
)
_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), type(Ellipsis), range, slice)
_MAX_ITEMS = 10_000


def _enum_member(v: Any) -> bool:
    """A member of an enum: Python's (``enum.Enum``) or a C++ one bound with pybind11.

    Members hold no state a run can change (``torch.nn.attention.SDPBackend.FLASH_ATTENTION``
    takes no attribute), so nothing needs saving; %tune was refused notebook 07's step for the
    ``SDPBackend`` members in a module's table (GPU call 3 of round 4).
    """
    if isinstance(v, enum.Enum):
        return True
    members = getattr(type(v), "__members__", None)
    return isinstance(members, dict) and v in members.values() and not hasattr(v, "__dict__")


_MAX_DEPTH = 6


@dataclass(frozen=True)
class Problem:
    """One thing the runs would change and the magic could not put back."""

    label: str
    what: str
    #: The option that would make it restorable ("--optimizer opt"), if the magic has one.
    fix: str = ""

    def sentence(self) -> str:
        fix = f" (pass {self.fix})" if self.fix else ""
        return f"{self.label}: {self.what}{fix}" if self.label else f"{self.what}{fix}"


@dataclass
class Named:
    """What the user named for the magic to save: models and optimizers, by variable name.

    ``model_option``/``optimizer_option``: the magic's options that name another one
    (``--model``, ``--optimizer``), or "" where it has none.
    """

    models: dict[str, torch.nn.Module] = field(default_factory=dict)
    optimizers: dict[str, torch.optim.Optimizer] = field(default_factory=dict)
    model_option: str = "--model"
    optimizer_option: str = "--optimizer"
    #: Objects the magic itself binds to the code's names for the runs and puts back itself
    #: (``%tune``'s own batch iterator under ``--batches NAME``): not looked into, no problem.
    supplied: tuple[Any, ...] = ()

    @classmethod
    def from_options(
        cls, user_ns: dict[str, Any], model: str | None, optimizer: str | None
    ) -> Named:
        """The model and optimizer named with ``--model``/``--optimizer`` (either may be absent).

        Raises:
            UsageError: a name that is missing, or holds no model or no optimizer.
        """
        models = {model: lookup_model(user_ns, model)} if model else {}
        optimizers = {optimizer: lookup_optimizer(user_ns, optimizer)} if optimizer else {}
        return cls(models, optimizers)


@dataclass
class Reached:
    """What the code reaches, sorted by what the repeated runs do with it (labels: its names)."""

    #: Tensors and NumPy arrays outside the named models and optimizers: values put back.
    tensors: dict[str, Any] = field(default_factory=dict)
    #: Dicts, lists and plain objects: their items (or ``__dict__``) put back.
    containers: dict[str, Any] = field(default_factory=dict)
    #: torch, ``random`` and NumPy generators: their state put back.
    generators: dict[str, Any] = field(default_factory=dict)
    #: (namespace, name) the code rebinds: the binding put back.
    bindings: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    #: Closure cells the code writes: their contents put back.
    cells: list[Any] = field(default_factory=list)
    #: Objects with ``state_dict``/``load_state_dict`` (schedulers, scalers): put back that way.
    stateful: dict[str, Any] = field(default_factory=dict)
    #: Modules that are not named but whose tensors the named models and optimizers hold (a
    #: second model under the one optimizer): their hooks and submodules put back.
    modules: dict[str, torch.nn.Module] = field(default_factory=dict)
    #: The process-wide settings the code reaches that are saved only then ("os.environ",
    #: "sys.path"; see ``settings.py``).
    process: set[str] = field(default_factory=set)
    problems: list[Problem] = field(default_factory=list)
    #: The notebook's names the code loads (its own and the functions' it follows). A magic
    #: that binds a name to another object for a run (``%tune``'s compiled model) changes the
    #: code only where it loads that name.
    loaded_names: set[str] = field(default_factory=set)
    #: How the code reaches each named model and optimizer: the labels it finds it under (its
    #: own name, or another way: a closure's ``net``, ``trainer.model``).
    named_routes: dict[str, list[str]] = field(default_factory=dict)


def _torch() -> Any:
    return sys.modules.get("torch")


def _numpy() -> Any:
    return sys.modules.get("numpy")


class _Walker:
    def __init__(self, named: Named, cell_names: dict[str, int], namespace: dict[str, Any]) -> None:
        self.named = named
        self.namespace = namespace  # the notebook's
        self.cell_names = cell_names
        self.out = Reached()
        self.seen: set[int] = set()
        self.followed: set[int] = set()
        self.codes: set[int] = set()
        self.problem_keys: set[tuple[str, str]] = set()
        self.named_modules: dict[int, str] = {}
        self.named_tensors: set[int] = set()
        self.named_optimizers = {id(o): n for n, o in named.optimizers.items()}
        self.named_objects = {
            id(o): n for n, o in [*named.models.items(), *named.optimizers.items()]
        }
        #: Objects it cannot look into, by id: (label, object, loads, data-attribute reads).
        #: One the code only reads data attributes of (``cfg.lr``, ``corpus.train``) is no
        #: problem; one it passes on or calls a method of is.
        self.opaque: dict[int, list[Any]] = {}
        #: Objects whose methods are followed, by id, with the stores those may make: saved
        #: through their state_dict ("any": it holds what they set), or of the user's own
        #: classes ("self": their __dict__ is put back; ``look_into``).
        self.followed_objects: dict[int, tuple[Any, _Stores]] = {}
        self._index_named()

    # ------------------------------------------------------------------ named state

    def _index_named(self) -> None:
        for name, model in self.named.models.items():
            for sub in model.modules():
                self.named_modules.setdefault(id(sub), name)
            for t in [*model.parameters(), *model.buffers()]:
                self.named_tensors.add(id(t))
                if t.grad is not None:
                    self.named_tensors.add(id(t.grad))
        torch = _torch()
        for opt in self.named.optimizers.values():
            for group in opt.param_groups:  # saved with their optimizer, wherever they live
                for p in group["params"]:
                    self.named_tensors.add(id(p))
                    if p.grad is not None:
                        self.named_tensors.add(id(p.grad))
            for state in opt.state.values():
                for v in state.values():
                    if torch is not None and isinstance(v, torch.Tensor):
                        self.named_tensors.add(id(v))

    def problem(self, label: str, what: str, fix: str = "") -> None:
        key = (label, what)
        if key not in self.problem_keys:
            self.problem_keys.add(key)
            self.out.problems.append(Problem(label, what, fix))

    # ------------------------------------------------------------------ code

    def where(self, code: types.CodeType, line: int | None) -> str:
        filename = code.co_filename
        if filename in self.cell_names:
            place = f"cell [{self.cell_names[filename]}]"
        else:
            place = filename.rsplit("/", 1)[-1]
        at = f" line {line}" if line else ""
        fn = "" if code.co_name in ("<module>", "<expression>") else f" in {code.co_name}"
        return f"{place}{at}{fn}"

    def code(
        self,
        code: types.CodeType,
        ns: dict[str, Any],
        cells: dict[str, Any],
        owner: type | None = None,
        depth: int = 0,
        *,
        stores: _Stores = "",
    ) -> None:
        """Follow one code object: ``ns`` its globals, ``cells`` its closure (free variables).

        ``stores``: which attribute stores are no problem (``_Stores``).
        """
        if id(code) in self.codes or depth > _MAX_DEPTH:
            return
        self.codes.add(id(code))
        builder = stores == "any" or code.co_name in _BUILDERS
        # A method of an object of the user's own class (``stores == "self"``): its stores on
        # ``self`` are put back with the object's __dict__; the bytecode says which are.
        self_name = code.co_varnames[0] if stores == "self" and code.co_argcount else None
        on_self = _SelfStores(self_name)
        prefix = "" if ns.get("__name__") == "__main__" else f"{ns.get('__name__', '?')}."
        line: int | None = None
        loaded: tuple[str, Any] | None = None  # the object the last instruction loaded
        for ins in dis.get_instructions(code):
            starts = ins.starts_line
            if isinstance(starts, int) and not isinstance(starts, bool):
                line = starts
            positions = getattr(ins, "positions", None)
            if positions is not None and positions.lineno:
                line = positions.lineno
            op, name = ins.opname, ins.argval
            current: tuple[str, Any] | None = None
            if op in _GLOBAL_LOADS and isinstance(name, str):
                if name in _BUILTIN_PROBLEMS:  # IPython puts its own open() in the namespace
                    self.builtin(name, code, line)
                elif name in ns:
                    if ns is self.namespace:
                        self.out.loaded_names.add(name)
                    current = (prefix + name, ns[name])
                    self.value(ns[name], prefix + name, depth + 1, loaded=True)
                    self.count_load(ns[name])

            elif op in _GLOBAL_STORES and isinstance(name, str):
                if all(b is not ns or n != name for b, n in self.out.bindings):
                    self.out.bindings.append((ns, name))
            elif op in _ATTR_LOADS and isinstance(name, str):
                self.attribute(name, code, line)
                current = self.attribute_of(loaded, name, owner, depth, stores)
            elif op in _ATTR_STORES and not builder and not on_self.targets(name):
                self.problem(
                    "",
                    f"sets an attribute (.{name}) at {self.where(code, line)}, which it "
                    "cannot put back",
                )
            elif op in _DEREF_LOADS and isinstance(name, str) and name in cells:
                try:
                    value = cells[name].cell_contents
                except ValueError:  # an empty cell: nothing held yet
                    value = None
                else:
                    current = (f"{code.co_name}'s {name}", value)
                    self.value(value, f"{code.co_name}'s {name}", depth + 1, loaded=True)
                    self.count_load(value)
            elif (
                op in _DEREF_STORES
                and isinstance(name, str)
                and name in cells
                and all(c is not cells[name] for c in self.out.cells)
            ):
                self.out.cells.append(cells[name])
            loaded = current
            on_self.after(op, ins.argval)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                inner = {n: cells[n] for n in const.co_freevars if n in cells}
                # Nested code (a lambda, a comprehension) has no self of its own.
                inner_stores: _Stores = "" if stores == "self" else stores
                self.code(const, ns, inner, owner, depth + 1, stores=inner_stores)

    def attribute(self, name: str, code: types.CodeType, line: int | None) -> None:
        where = self.where(code, line)
        if name in FILE_WRITERS:
            self.problem("", f"calls .{name}() at {where}, which may write a file")
        elif name in GLOBAL_SETTERS:
            self.problem("", f"calls .{name}() at {where}, which changes a global setting")
        elif name in PEAK_RESETTERS:
            self.problem("", f"calls .{name}() at {where}, which resets torch's peak counters")

    def attribute_of(
        self,
        loaded: tuple[str, Any] | None,
        name: str,
        owner: type | None,
        depth: int,
        stores: _Stores = "",
    ) -> tuple[str, Any] | None:
        """The value of ``loaded.name`` where it can be read without running code.

        Attributes of the user's own Python modules (``data.next_batch``), methods of the
        class whose method is being read (``self.helper``, followed in turn), and methods of
        an object saved through its ``state_dict`` whose class is the user's own
        (``ema.update``: followed, the attributes they set being that object's state).
        """
        if owner is not None:
            for cls in owner.__mro__:
                fn = cls.__dict__.get(name)
                if isinstance(fn, types.FunctionType):
                    self.function(fn, f"{owner.__name__}.{name}", depth + 1, owner, stores=stores)
                    break
        if loaded is None:
            return None
        label, obj = loaded
        if obj is os or obj is sys:  # os.environ, os.putenv, sys.path...
            setting = _process_setting(getattr(obj, name, None))
            if setting is not None:
                self.out.process.add(setting)
            return None
        followed = self.followed_objects.get(id(obj))
        if followed is not None and followed[0] is obj:
            self.method(obj, name, depth, followed[1])
            return None
        entry = self.opaque.get(id(obj))
        if entry is not None and entry[1] is obj:
            attr = _data_attribute(obj, name)
            if attr is not _NO_ATTRIBUTE:
                entry[3] += 1  # a read of plain data: the value is judged on its own
                self.value(attr, f"{label}.{name}", depth + 1)
                return (f"{label}.{name}", attr)
            if _class_function(type(obj), name) is not None and _own_object(obj):
                self.look_into(obj, label, depth)
                self.method(obj, name, depth, "self")
            return None
        if isinstance(obj, types.ModuleType) and not _library_module(obj):
            value = obj.__dict__.get(name)
            if value is not None:
                self.value(value, f"{label}.{name}", depth + 1)
                return (f"{label}.{name}", value)
        return None

    def method(self, obj: Any, name: str, depth: int, stores: _Stores) -> None:
        """Follow ``obj.name`` where the user's own class defines it (``stores``: its stores)."""
        fn = _class_function(type(obj), name)
        if fn is not None:
            self.function(fn, f"{type(obj).__name__}.{name}", depth + 1, type(obj), stores=stores)

    def look_into(self, obj: Any, label: str, depth: int) -> None:
        """Look into an object of the user's own class whose method the code calls.

        Its ``__dict__`` is put back (a container), each attribute judged on its own, and the
        methods the code calls on it are followed, their stores on ``self`` being that
        ``__dict__``'s.
        """
        del self.opaque[id(obj)]
        self.followed_objects[id(obj)] = (obj, "self")
        self.out.containers[label] = obj
        for key, item in list(vars(obj).items())[:_MAX_ITEMS]:
            self.value(item, f"{label}.{key}", depth + 1)

    def count_load(self, v: Any) -> None:
        entry = self.opaque.get(id(v))
        if entry is not None and entry[1] is v:
            entry[2] += 1

    def opaque_problems(self) -> None:
        """The objects the code did more with than read data attributes."""
        for label, obj, loads, reads in self.opaque.values():
            if loads == 0 or loads > reads:
                self.problem(label, f"a {type(obj).__name__}, which it cannot look into")

    def builtin(self, name: str, code: types.CodeType, line: int | None) -> None:
        self.problem("", f"{_BUILTIN_PROBLEMS[name]} ({self.where(code, line)})")

    # ------------------------------------------------------------------ values

    def function(
        self,
        fn: types.FunctionType,
        label: str,
        depth: int,
        owner: type | None = None,
        *,
        stores: _Stores = "",
    ) -> None:
        if id(fn) in self.followed:
            return
        self.followed.add(id(fn))
        for default in (*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values()):
            self.value(default, f"{label}'s default", depth + 1)
        code = fn.__code__
        cells = dict(zip(code.co_freevars, fn.__closure__ or (), strict=False))
        if is_library_file(code.co_filename):
            for cell_name, cell in cells.items():  # the state a library's closure carries
                try:
                    self.value(cell.cell_contents, f"{label}'s {cell_name}", depth + 1)
                except ValueError:
                    continue
            return
        self.code(code, fn.__globals__, cells, owner, depth, stores=stores)

    def value(self, v: Any, label: str, depth: int = 0, *, loaded: bool = False) -> None:
        """Sort one object the code reaches (``loaded``: by a name the code loads)."""
        if isinstance(v, (_IMMUTABLE, types.ModuleType)) or _enum_member(v):
            return
        setting = _process_setting(v)
        if setting is not None:
            self.out.process.add(setting)
            return
        named = self.named_objects.get(id(v))
        if named is not None:  # before the seen check: every way to it counts
            routes = self.out.named_routes.setdefault(named, [])
            if label not in routes:
                routes.append(label)
        if id(v) in self.seen or depth > _MAX_DEPTH:
            return
        self.seen.add(id(v))
        if any(v is supplied for supplied in self.named.supplied):
            return  # the magic's own object, put back by the magic
        torch = _torch()
        np = _numpy()
        if torch is not None and self.torch_value(v, label, depth):
            return
        if np is not None and self.numpy_value(v, label, np):
            return
        if isinstance(v, random.Random):
            self.out.generators[label] = v
            return
        if isinstance(v, logging.Logger):  # its level is saved (settings.py); it writes output
            return
        if isinstance(v, types.FunctionType):
            self.function(v, label, depth)
            return
        if isinstance(v, types.MethodType):
            self.value(v.__self__, label.rsplit(".", 1)[0], depth + 1)
            self.value(v.__func__, label, depth + 1)
            return
        if isinstance(v, functools.partial):
            self.value(v.func, label, depth + 1)
            for i, arg in enumerate(v.args):
                self.value(arg, f"{label}'s argument {i}", depth + 1)
            for key, arg in v.keywords.items():
                self.value(arg, f"{label}'s {key}", depth + 1)
            return
        if isinstance(v, types.BuiltinFunctionType | types.BuiltinMethodType):
            owner_obj = getattr(v, "__self__", None)
            if owner_obj is not None and not isinstance(owner_obj, types.ModuleType):
                self.value(owner_obj, label.rsplit(".", 1)[0], depth + 1)
            return
        if isinstance(v, type):
            self.klass(v, label, depth)
            return
        orig = getattr(v, "_torchdynamo_orig_callable", None)  # a torch.compile'd function
        if orig is not None:
            self.value(orig, label, depth + 1)
            return
        if isinstance(v, dict | list | set | bytearray):
            self.container(v, label, depth)
            return
        if isinstance(v, tuple | frozenset):
            self.items(v, label, depth)
            return
        if hasattr(v, "__next__"):
            self.problem(
                label,
                f"a {type(v).__name__}: each run draws its next item, which cannot be put back",
            )
            return
        if _plain_object(v):
            self.out.containers[label] = v
            for key, item in list(vars(v).items())[:_MAX_ITEMS]:
                self.value(item, f"{label}.{key}", depth + 1)
            return
        if callable(getattr(v, "state_dict", None)) and callable(
            getattr(v, "load_state_dict", None)
        ):
            self.stateful(v, label, depth)
            return
        if torch is not None and isinstance(v, _read_only_torch_types()):
            return
        if loaded and hasattr(v, "__dict__"):
            self.opaque[id(v)] = [label, v, 0, 0]  # judged by how the code uses it (the end)
            return
        self.problem(label, f"a {type(v).__name__}, which it cannot look into")

    def torch_value(self, v: object, label: str, depth: int) -> bool:
        """Sort a torch object; False if ``v`` is not one (torch is loaded: never imported here)."""
        import torch

        if isinstance(v, torch.Tensor):
            if id(v) in self.named_tensors or v.is_meta or holds_no_memory(v):
                return True  # saved with its model, or shapes only
            if v.layout != torch.strided:
                self.problem(label, f"a {v.layout} tensor, which it does not save")
            else:
                self.out.tensors[label] = v
            return True
        if isinstance(
            v, torch.dtype | torch.device | torch.Size | torch.memory_format | torch.layout
        ):
            return True
        if isinstance(v, torch.nn.Module):
            self.module(v, label, depth)
            return True
        if isinstance(v, torch.optim.Optimizer):
            self.optimizer(v, label, depth)
            return True
        if isinstance(v, torch.Generator):
            self.out.generators[label] = v
            return True
        return False

    def numpy_value(self, v: Any, label: str, np: Any) -> bool:
        if isinstance(v, np.ndarray):
            self.out.tensors[label] = v
            return True
        if isinstance(v, np.generic | np.dtype):
            return True
        if isinstance(v, np.random.Generator | np.random.RandomState):
            self.out.generators[label] = v
            return True
        return False

    def module(self, m: torch.nn.Module, label: str, depth: int) -> None:
        import torch

        orig = getattr(m, "_orig_mod", None)  # torch.compile's wrapper: its eager module
        if isinstance(orig, torch.nn.Module):
            self.seen.discard(id(orig))
            self.module(orig, label, depth)
            return
        if id(m) not in self.named_modules:
            state = [t for t in [*m.parameters(), *m.buffers()] if id(t) not in self.named_tensors]
            if not state:  # its tensors are saved with the named state: its structure here
                self.out.modules[label] = m
            else:
                fix = f"{self.named.model_option} {label}" if self.named.model_option else ""
                self.problem(
                    label,
                    f"a {type(m).__name__} with {len(state)} parameter or buffer tensor(s) "
                    "that is not the named model",
                    fix if label.isidentifier() else "",
                )
                return
        self.follow_module(m, label, depth)

    def follow_module(self, m: torch.nn.Module, label: str, depth: int) -> None:
        """The user's code that runs when ``m`` is called: forward methods and hooks."""
        import torch

        for sub in m.modules():
            cls = type(sub)
            if not is_library_file(getattr(sys.modules.get(cls.__module__), "__file__", "") or ""):
                for name in ("forward", "__call__"):
                    fn = _class_function(cls, name)
                    if fn is not None:
                        self.function(fn, f"{cls.__name__}.{name}", depth + 1, cls)
            for hooks in (
                "_forward_hooks",
                "_forward_pre_hooks",
                "_backward_hooks",
                "_backward_pre_hooks",
            ):
                for i, hook in enumerate(getattr(sub, hooks, {}).values()):
                    self.value(hook, f"{label}'s hook {i}", depth + 1)
            for p in sub.parameters(recurse=False):
                for hooks in ("_backward_hooks", "_post_accumulate_grad_hooks"):
                    for i, hook in enumerate((getattr(p, hooks, None) or {}).values()):
                        self.value(hook, f"{label}'s parameter hook {i}", depth + 1)
            for key, attr in vars(sub).items():  # plain attributes: tensors, other objects
                if key.startswith("_") or key == "training":
                    continue
                if isinstance(attr, torch.Tensor) and id(attr) not in self.named_tensors:
                    self.out.tensors[f"{label}.{key}"] = attr

    def optimizer(self, opt: torch.optim.Optimizer, label: str, depth: int) -> None:
        if id(opt) not in self.named_optimizers:
            owner = self.owner_of(opt)
            over = f" over {owner}'s parameters" if owner else ""
            fix = f"{self.named.optimizer_option} {label}" if self.named.optimizer_option else ""
            self.problem(
                label,
                f"the {type(opt).__name__}{over}, not named: each run would step it",
                fix if label.isidentifier() else "",
            )
            return
        cls = type(opt)
        if not is_library_file(getattr(sys.modules.get(cls.__module__), "__file__", "") or ""):
            fn = _class_function(cls, "step")
            if fn is not None:
                self.function(fn, f"{cls.__name__}.step", depth + 1, cls)
        for hooks in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks"):
            for i, hook in enumerate((getattr(opt, hooks, None) or {}).values()):
                self.value(hook, f"{label}'s hook {i}", depth + 1)

    def stateful(self, v: Any, label: str, depth: int) -> None:
        """An object with ``state_dict``/``load_state_dict``: saved and put back through those.

        What its state_dict leaves out is judged on its own: a scheduler's optimizer (a
        scheduler changes the learning rate in its optimizer's ``param_groups``, so that
        optimizer must be named). The methods the code calls on an object of the user's own
        class are followed for what else they reach (``attribute_of``); the attributes they set
        are the object's own, put back with it.
        """
        self.out.stateful[label] = v
        self.followed_objects[id(v)] = (v, "any")
        torch = _torch()
        if torch is not None:
            for attr in list(getattr(v, "__dict__", {}).values()):
                if isinstance(attr, torch.optim.Optimizer) and id(attr) not in (
                    self.named_optimizers
                ):
                    option = self.named.optimizer_option
                    self.problem(
                        label,
                        f"a {type(v).__name__} over a {type(attr).__name__} that is not named: "
                        "each run changes that optimizer's param_groups"
                        + (f" (name it with {option})" if option else ""),
                    )
        call = _class_function(type(v), "__call__")  # ema(model): its __call__ runs
        if call is not None:
            self.function(call, f"{type(v).__name__}.__call__", depth + 1, type(v), stores="any")

    def owner_of(self, opt: torch.optim.Optimizer) -> str:
        ids = {id(p) for g in opt.param_groups for p in g["params"]}
        for name, model in self.named.models.items():
            if ids & {id(p) for p in model.parameters()}:
                return name
        return ""

    def klass(self, cls: type, label: str, depth: int) -> None:
        module = sys.modules.get(cls.__module__)
        if is_library_file(getattr(module, "__file__", "") or ""):
            return
        for name in ("__init__", "__new__", "__call__"):
            fn = _class_function(cls, name)
            if fn is not None:
                self.function(fn, f"{cls.__name__}.{name}", depth + 1, cls)

    def container(self, v: Any, label: str, depth: int) -> None:
        if len(v) > _MAX_ITEMS:
            self.problem(label, f"a {type(v).__name__} of {len(v):,} items, too large to save")
            return
        self.out.containers[label] = v
        self.items(v, label, depth)

    def items(self, v: Iterable[Any], label: str, depth: int) -> None:
        if isinstance(v, dict):
            for key, item in list(v.items())[:_MAX_ITEMS]:
                self.value(item, f"{label}[{key!r}]", depth + 1)
        elif not isinstance(v, set | frozenset | bytearray):
            for i, item in enumerate(list(v)[:_MAX_ITEMS]):
                self.value(item, f"{label}[{i}]", depth + 1)


def _process_setting(v: Any) -> str | None:
    """Which of ``os.environ`` and ``sys.path`` ``v`` is, or changes (``os.putenv``), or None."""
    if v is os.environ or v is getattr(os, "environb", None):
        return "os.environ"
    if any(v is getattr(os, name, None) for name in ("putenv", "unsetenv")):
        return "os.environ"
    if v is sys.path:
        return "sys.path"
    return None


def _read_only_torch_types() -> tuple[type, ...]:
    """Torch objects a run reads or renews without keeping state that the magic would miss.

    A DataLoader starts a new iterator (its shuffling draws from torch's RNG, which is
    restored) at each ``for``; a Dataset is indexed; streams and events are recorded on.
    torch is loaded (the caller asked): never imported here.
    """
    import torch

    found: list[type] = [torch.utils.data.DataLoader, torch.utils.data.Dataset]
    for name in ("Stream", "Event"):
        for owner in (torch, torch.cuda):
            cls = getattr(owner, name, None)
            if isinstance(cls, type):
                found.append(cls)
    return tuple(found)


_NO_ATTRIBUTE = object()


def _data_attribute(obj: Any, name: str) -> Any:
    """``obj.name`` if it is plain data held in the object's ``__dict__``, else a marker."""
    attr = vars(obj).get(name, _NO_ATTRIBUTE)
    if attr is _NO_ATTRIBUTE or callable(attr):
        return _NO_ATTRIBUTE
    return attr


def _class_function(cls: type, name: str) -> types.FunctionType | None:
    """``cls.name`` where the user's own class (not a library base) defines it."""
    for klass in cls.__mro__:
        if not _users_class(klass):
            return None
        fn = klass.__dict__.get(name)
        if isinstance(fn, types.FunctionType):
            return fn
    return None


def _users_class(klass: type) -> bool:
    """Whether ``klass`` is the user's: its methods' code is in cells or the user's files.

    A class without methods of its own is judged by its module's file (a cell's module, which
    IPython puts in ``sys.modules``, has none).
    """
    functions = [f for f in vars(klass).values() if isinstance(f, types.FunctionType)]
    if functions:
        return not any(is_library_file(f.__code__.co_filename) for f in functions)
    module = sys.modules.get(klass.__module__)
    return not is_library_file(getattr(module, "__file__", "") or "")


def _library_module(module: types.ModuleType) -> bool:
    filename = getattr(module, "__file__", None)
    return filename is None or is_library_file(filename)


class _SelfStores:
    """Which ``STORE_ATTR``s of a method store on its own ``self``, read from the bytecode.

    Two shapes: ``self.x = v`` (``self`` loaded right before the store) and ``self.x += v``
    (``self`` loaded, copied, ``.x`` read, ..., ``SWAP``, the store). Any other store (on
    ``self.model``, on another object) is not one; ``self_name`` ``None``: none is.
    """

    def __init__(self, self_name: str | None) -> None:
        self.self_name = self_name
        self.last_loads_self = False  # the last instruction pushed self
        self.copied_self = False  # ...then COPY: an augmented assignment on self starts
        self.augmented: str | None = None  # the attribute that assignment read
        self.last_op = ""

    def targets(self, name: str) -> bool:
        """Whether the ``STORE_ATTR name`` now read stores on ``self``."""
        if self.self_name is None:
            return False
        return self.last_loads_self or (self.last_op == "SWAP" and self.augmented == name)

    def after(self, op: str, argval: Any) -> None:
        """Note instruction ``op`` (its ``argval``), read after :meth:`targets`."""
        if self.self_name is None:
            return
        loads = op in ("LOAD_FAST", "LOAD_FAST_CHECK") and argval == self.self_name
        # Python 3.13 loads two locals in one instruction: self.x = v is (v, self).
        loads |= op == "LOAD_FAST_LOAD_FAST" and tuple(argval)[-1:] == (self.self_name,)
        if op == "COPY" and self.last_loads_self:
            self.copied_self = True
        elif op in _ATTR_LOADS and self.copied_self:
            self.augmented, self.copied_self = argval, False
        elif op in _ATTR_STORES:
            self.augmented = None
        elif op != "COPY":
            self.copied_self = False
        if op in ("STORE_FAST", "DELETE_FAST") and argval == self.self_name:
            self.self_name = None  # self rebound: no store after this is known to be on it
            loads = False
        self.last_loads_self = loads
        self.last_op = op


def _own_object(v: Any) -> bool:
    """Whether ``v`` is an object of the user's own classes that can be read like data.

    A ``__dict__``, and in its classes (all the user's, but ``object``) no property, slot or
    attribute hook.
    """
    if not hasattr(v, "__dict__") or isinstance(v, type):
        return False
    for klass in type(v).__mro__[:-1]:
        if not _users_class(klass):
            return False
        for name, attr in klass.__dict__.items():
            if name in _ATTRIBUTE_HOOKS:
                return False
            descriptor = hasattr(type(attr), "__set__") or hasattr(type(attr), "__delete__")
            if descriptor and name not in ("__dict__", "__weakref__"):
                return False
    return True


def _plain_object(v: Any) -> bool:
    """An object that only holds data: a ``__dict__`` and no methods of the user's own."""
    if not hasattr(v, "__dict__") or isinstance(v, type):
        return False
    if isinstance(v, types.SimpleNamespace):
        return True
    for klass in type(v).__mro__[:-1]:
        for name, attr in klass.__dict__.items():
            if isinstance(attr, types.FunctionType) and not name.startswith("__"):
                return False
            if isinstance(attr, property):
                return False
    return True


def reach(
    codes: Iterable[types.CodeType],
    namespace: dict[str, Any],
    named: Named,
    cell_names: dict[str, int] | None = None,
) -> Reached:
    """What ``codes`` (run with ``namespace`` as globals) reach, sorted (see the module doc)."""
    walker = _Walker(named, cell_names or {}, namespace)
    torch = _torch()
    for name, model in named.models.items():
        walker.seen.add(id(model))
        walker.follow_module(model, name, 0)
    for name, opt in named.optimizers.items():
        walker.seen.add(id(opt))
        walker.optimizer(opt, name, 0)
    if torch is not None:
        hooks = sys.modules.get("torch.nn.modules.module")
        for attr in (
            "_global_forward_hooks",
            "_global_forward_pre_hooks",
            "_global_backward_hooks",
        ):
            for i, hook in enumerate((getattr(hooks, attr, None) or {}).values()):
                walker.value(hook, f"a global module hook {i}", 1)
    for code in codes:
        walker.code(code, namespace, {})
    walker.opaque_problems()
    return walker.out
