"""What ``%tune`` is told to tune: the step, the model, the optimizer, where the batches come from.

Everything here is read and checked before anything runs: a name that is missing or holds the
wrong kind of object, a step that draws from an iterator ``%tune`` was not told about, an option
that goes with another one: each is a ``UsageError`` that says what to do, and nothing has
changed yet.

How the step gets its batches (so that ``%tune`` can try other loaders):

- ``--batches NAME``: the step draws each batch with ``next(NAME)`` (``batches = iter(loader)``
  or a generator over a loader, as notebook 07's ``endless(loader)``). While ``%tune`` runs,
  NAME is bound to its own iterator, which draws from the loader being measured (the one the
  step had, then each new one), epoch after epoch; the object NAME held is put back afterwards,
  untouched (its position in its epoch included). The loader is ``--loader`` or, without it, the
  DataLoader that NAME's generator holds.
- ``--loader NAME`` alone: the step iterates NAME itself (``for x, y in loader: ...``, an epoch
  per call); NAME is bound to each new loader in turn, and to the user's own again afterwards.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
from dataclasses import dataclass
from types import CodeType
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from jupyter_gpu.magics.shell.args import (
    check_identifier,
    compile_expression,
    lookup,
    lookup_model,
    lookup_optimizer,
    type_name,
)

if TYPE_CHECKING:
    import torch


@dataclass
class Target:
    """The step and the objects named for it (checked), and where it runs."""

    expr: str
    code: CodeType
    model_name: str
    model: Any
    optimizer_name: str | None
    optimizer: Any
    #: The DataLoader the step's batches come from (``--loader``, or the one ``--batches``
    #: holds); ``loader_name`` is the notebook's name for it, ``None`` when it has none.
    loader: Any = None
    loader_name: str | None = None
    #: The iterator variable the step calls ``next()`` on (``--batches``), and what it held.
    batches_name: str | None = None
    batches: Any = None
    #: ``--batch NAME``: the variable holding the batch size the step (or its loader) uses.
    batch_name: str | None = None
    batch_size: int | None = None
    device: str = "cpu"
    #: Why the loader's settings cannot be changed safely ("" when they can).
    loader_note: str = ""

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    @property
    def epoch_mode(self) -> bool:
        """The step iterates the loader itself (``--loader`` without ``--batches``)."""
        return self.loader is not None and self.batches_name is None


def _model(user_ns: dict[str, Any], name: str) -> torch.nn.Module:
    model = lookup_model(user_ns, name)
    if hasattr(model, "_orig_mod"):
        raise UsageError(
            f"--model {name} is a torch.compile wrapper: %tune measures the step as it is and "
            f"tries compiling itself; give it the eager model (%compile {name} --undo first)."
        )
    return model


def loader_in(value: Any, loader_type: type, user_ns: dict[str, Any]) -> Any:
    """The DataLoader behind an iterator, or ``None`` where it cannot be told.

    A generator over one holds it in its frame (one level is read: ``endless(loader)``). A
    DataLoader's own iterator does not hold its loader; it holds the loader's dataset and
    index sampler (``torch.utils.data.dataloader``), so the notebook's loader with those same
    two objects is the one.
    """
    if inspect.isgenerator(value):
        if value.gi_frame is None:
            return None
        found = [v for v in value.gi_frame.f_locals.values() if isinstance(v, loader_type)]
        return found[0] if len(found) == 1 else None
    dataset = getattr(value, "_dataset", None)
    sampler = getattr(value, "_index_sampler", None)
    if dataset is None or sampler is None:
        return None
    owners = {
        id(v): v
        for v in user_ns.values()
        if isinstance(v, loader_type)
        and getattr(v, "dataset", None) is dataset
        and getattr(v, "_index_sampler", None) is sampler
    }
    return next(iter(owners.values())) if len(owners) == 1 else None


def _device(model: torch.nn.Module) -> str:
    """Where the model's first parameter (or buffer) is: "cuda", "cpu", ...; "cpu" with none."""
    tensors = itertools.chain(model.parameters(), model.buffers())
    return next((tensor.device.type for tensor in tensors), "cpu")


def read_target(shell: Any, args: argparse.Namespace) -> Target:
    """Check the magic's line against the notebook and return what it names.

    Raises:
        UsageError: for each thing that cannot work, with what to do (nothing runs before).
    """
    import torch  # loaded already: the magic imported it

    user_ns = shell.user_ns
    if len(args.step) != 1:
        raise UsageError(
            '%tune takes one expression in quotes, the training step: %tune "train_step()" '
            "--model model --optimizer opt."
        )
    expr = args.step[0]
    code = compile_expression(shell, expr, "%tune")
    if not args.model:
        raise UsageError(
            f'%tune needs --model NAME, the model {expr} trains: %tune "{expr}" --model model '
            "--optimizer opt (it is put back after the runs, and compiled or converted on trial)."
        )
    model = _model(user_ns, args.model)
    optimizer = lookup_optimizer(user_ns, args.optimizer) if args.optimizer else None
    target = Target(expr, code, args.model, model, args.optimizer, optimizer)
    target.device = _device(model)
    data = torch.utils.data
    if args.loader:
        loader = lookup(user_ns, args.loader, "--loader")
        if not isinstance(loader, data.DataLoader):
            raise UsageError(
                f"--loader {args.loader} is a {type_name(loader)}, not a torch.utils.data."
                "DataLoader: name the DataLoader the step's batches come from."
            )
        target.loader, target.loader_name = loader, args.loader
    if args.batches:
        check_identifier(args.batches, "--batches")
        batches = lookup(user_ns, args.batches, "--batches")
        if not hasattr(batches, "__next__"):
            raise UsageError(
                f"--batches {args.batches} is a {type_name(batches)}, not an iterator: the step "
                f"should draw its batches with next({args.batches}), e.g. {args.batches} = "
                "iter(loader)."
            )
        target.batches_name, target.batches = args.batches, batches
        if target.loader is None:
            target.loader = loader_in(batches, data.DataLoader, user_ns)
            target.loader_name = next(
                (k for k, v in user_ns.items() if v is target.loader and not k.startswith("_")),
                None,
            )
            if target.loader is None:
                raise UsageError(
                    f"--batches {args.batches} is a {type_name(batches)} whose DataLoader "
                    "%tune cannot find (it reads a generator's variables one level down, and "
                    "a DataLoader iterator's dataset and sampler): pass --loader NAME too, the "
                    "DataLoader it draws from."
                )
        _check_uses(shell, code, args.batches, expr)
    if args.batch:
        size = lookup(user_ns, args.batch, "--batch")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise UsageError(
                f"--batch {args.batch} holds a {type_name(size)}: it names the variable with the "
                "batch size the step (or its loader) uses, a whole number such as batch = 64."
            )
        target.batch_name, target.batch_size = args.batch, size
        by_loader = target.loader is not None and target.loader.batch_size == size
        if not by_loader and args.batch not in _loaded_names(shell, code):
            raise UsageError(
                f"--batch {args.batch}: {expr} does not read {args.batch} (nor do the "
                "functions it calls), and no --loader/--batches DataLoader batches by it "
                f"(batch_size={size}): name the variable the step makes its batches with."
            )
    if target.loader is not None and isinstance(target.loader.dataset, data.IterableDataset):
        target.loader_note = (
            "an IterableDataset: with workers, each worker yields the whole dataset unless the "
            "dataset splits the work itself (torch.utils.data.get_worker_info)"
        )
    return target


def _loaded_names(shell: Any, code: CodeType) -> set[str]:
    """The global names ``code`` loads, and those of the notebook functions it calls."""
    names = set(code.co_names)
    for called in list(names):
        fn = shell.user_ns.get(called)
        inner = getattr(fn, "__code__", None)
        if inner is not None:
            names |= set(inner.co_names)
    return names


def _check_uses(shell: Any, code: CodeType, name: str, expr: str) -> None:
    """The step (or a function it calls) must load ``name``; else --batches would change nothing."""
    if name not in _loaded_names(shell, code):
        raise UsageError(
            f"--batches {name}: {expr} does not draw from {name} (neither it nor the functions "
            f"it calls load that name): the step should call next({name})."
        )
