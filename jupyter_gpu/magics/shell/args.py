"""Argument parsing and notebook-namespace helpers shared by the magics.

The magics declare their options with IPython's ``@magic_arguments`` (so that ``%compile?`` is
the help) and parse them here: with POSIX quoting, so that ``--bench "model(x, y)"`` gives the
expression without its quotes, and with errors turned into ``UsageError`` sentences.
"""

from __future__ import annotations

import argparse
import ast
import functools
import inspect
import keyword
import shlex
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

from IPython.core import magic_arguments as _ipython_args
from IPython.core.error import UsageError
from IPython.core.magic import Magics

if TYPE_CHECKING:
    import torch
    from IPython.core.interactiveshell import InteractiveShell

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


class ShellMagics(Magics):
    """``Magics`` whose ``shell`` is always set (IPython types it as optional)."""

    shell: InteractiveShell


def magic_arguments() -> Callable[[F], F]:
    """IPython's ``@magic_arguments()`` with a type (the help of ``%name?`` comes from it).

    IPython writes the usage as a reStructuredText literal block (``::`` and an indent), which
    ``%name?`` shows as it is: the help then started with a stray ``::``. The usage is given
    plain here, flush left. Every magic goes through here, so its usage errors also leave
    nothing of the magic's own frames behind (:func:`usage_errors_hold_nothing`).
    """
    decorate = cast("Callable[[F], F]", _ipython_args.magic_arguments())  # type: ignore[no-untyped-call]  # IPython has no types here

    def wrapper(func: F) -> F:
        func = decorate(func)
        func.__doc__ = plain_help(func.__doc__ or "")
        return usage_errors_hold_nothing(func)

    return wrapper


def usage_errors_hold_nothing(func: F) -> F:
    """``func``, raising its ``UsageError``s without the frames they passed through.

    IPython keeps the last error (``sys.last_traceback``, ``sys.last_exc``) until the next one,
    and a traceback keeps every frame's variables alive: after ``%compile model --optimizer
    nope`` was refused, ``del model`` freed nothing, since the magic's frames still held the
    model they had looked up, and %memsummary listed those frames' variables as holders. IPython
    shows a usage error as its message alone, so the frames serve no one. The error keeps its
    message and type; its cause and context go too (their tracebacks hold the same frames).
    """

    @functools.wraps(func)  # keeps IPython's parser and flags, which sit on the function
    def without_frames(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except UsageError as error:
            error.__context__ = None  # ``from None`` drops the cause and hides the context
            raise error.with_traceback(None) from None

    return cast("F", without_frames)


def plain_help(doc: str) -> str:
    """IPython's help text without the ``::`` that opens its usage block, and flush left."""
    if not doc.startswith("::"):
        return doc
    usage, _, rest = doc[2:].lstrip("\n").partition("\n\n")
    lines = usage.splitlines()
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    usage = "\n".join(line[indent:] for line in lines)
    return f"{usage}\n\n{rest}" if rest else usage


def argument(*args: Any, **kwargs: Any) -> Callable[[F], F]:
    """IPython's ``@argument(...)`` (an ``argparse`` argument) with a type."""
    return cast("Callable[[F], F]", _ipython_args.argument(*args, **kwargs))  # type: ignore[no-untyped-call]  # as above


def output_options() -> Callable[[F], F]:
    """``-o`` (return a result object) and ``-q`` (print nothing): every measuring magic's last two.

    One place for them keeps their spelling and help the same in each magic's ``%name?``.
    """
    output = argument("-o", "--output", action="store_true", help="return a result object")
    quiet = argument("-q", "--quiet", action="store_true", help="print nothing")

    def wrapper(func: F) -> F:
        # Applied innermost first, as if the two were written ``-o`` above ``-q``.
        return output(quiet(func))

    return wrapper


def allow_side_effects_option(scope: str, code: str) -> Callable[[F], F]:
    """``--allow-side-effects``, for the magics that run the user's code again and again.

    ``scope`` is the option it goes with (``"--bench"``) and ``code`` what that runs (``"EXPR"``);
    ``runs.RepeatedRuns`` refuses before the runs, unless it is given, when what the code changes
    cannot all be put back.
    """
    return argument(
        "--allow-side-effects",
        action="store_true",
        help=f"{scope}: run {code} even if what it changes cannot all be put back",
    )


def parse(magic: Callable[..., Any], line: str) -> argparse.Namespace:
    """Parse a magic's argument line with the parser ``@magic_arguments`` attached to it.

    Raises:
        UsageError: unbalanced quotes or arguments the magic does not take; the message says
            what to do.
    """
    try:
        argv = shlex.split(line, posix=True)
    except ValueError as exc:
        raise UsageError(
            f"Could not read the arguments ({exc}): close the quotes around expressions, "
            f'e.g. --bench "model(x)".'
        ) from exc
    parser: argparse.ArgumentParser = magic.parser  # type: ignore[attr-defined]  # set by @magic_arguments
    name = getattr(magic, "__name__", "magic")
    try:
        return parser.parse_args(argv)
    except UsageError as exc:
        message = str(exc)
        if "unrecognized arguments" in message:
            message += f". Put expressions in quotes; %{name}? lists the options this magic takes."
        elif "invalid choice" not in message:
            message += f". %{name}? shows the usage."
        raise UsageError(message) from None


def dtype_choice(value: str) -> str:
    """Argparse type for ``--dtype``: the autocast dtypes, with a sentence for anything else."""
    aliases = {
        "bf16": "bf16",
        "bfloat16": "bf16",
        "fp16": "fp16",
        "float16": "fp16",
        "half": "fp16",
    }
    key = value.strip().lower()
    if key in aliases:
        return aliases[key]
    raise argparse.ArgumentTypeError(
        f"--dtype {value} is not a mixed-precision dtype: use bf16 or fp16 "
        "(autocast lowers precision to one of these; int8 and fp8 need quantization tools)"
    )


def _whole_number(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None


def positive_int(value: str) -> int:
    """Argparse type for counts that must be at least 1."""
    number = _whole_number(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return number


def non_negative_int(value: str) -> int:
    """Argparse type for indices and counts that may be 0."""
    number = _whole_number(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"{value} must be 0 or more")
    return number


def check_identifier(name: str, what: str = "NAME") -> str:
    """Return ``name`` if it is a plain Python variable name, else raise ``UsageError``."""
    if not name.isidentifier() or keyword.iskeyword(name):
        raise UsageError(
            f"{what} must be the name of a variable in the notebook, like model; got {name!r}."
        )
    return name


def lookup(user_ns: dict[str, Any], name: str, what: str = "NAME") -> Any:
    """The value bound to ``name`` in the notebook, or a ``UsageError`` that says what to do."""
    check_identifier(name, what)
    if name not in user_ns:
        close = [n for n in user_ns if not n.startswith("_") and n.lower() == name.lower()]
        hint = f" Did you mean {close[0]}?" if close else ""
        raise UsageError(
            f"There is no variable named {name} in the notebook: define it first (run the cell "
            f"that creates it) or check the spelling.{hint}"
        )
    return user_ns[name]


#: What ``--model`` and ``--optimizer`` must hold: torch's name for it, its role, an example.
_NAMED_KINDS = {
    "--model": ("torch.nn.Module", "the model the code trains", "model"),
    "--optimizer": ("torch.optim.Optimizer", "the optimizer it steps", "opt"),
}


def lookup_model(user_ns: dict[str, Any], name: str) -> torch.nn.Module:
    """:func:`lookup` of ``--model NAME``; a ``UsageError`` naming what it holds if no model."""
    import torch  # loaded already: the magic imported it

    _not_an_attribute(name, "--model")
    return _checked(lookup(user_ns, name, "--model"), torch.nn.Module, "--model", name)


def lookup_optimizer(user_ns: dict[str, Any], name: str) -> torch.optim.Optimizer:
    """:func:`lookup` of ``--optimizer NAME``; likewise."""
    import torch  # loaded already: the magic imported it

    _not_an_attribute(name, "--optimizer")
    value = lookup(user_ns, name, "--optimizer")
    return _checked(value, torch.optim.Optimizer, "--optimizer", name)


def _not_an_attribute(name: str, option: str) -> None:
    """The ``UsageError`` for ``--model trainer.model``: what to name instead.

    The magics save and put back what a notebook name holds, and the runs reach the object
    through the attribute as well, so a name bound to it serves.
    """
    if is_attribute(name):
        last = name.rsplit(".", 1)[-1]
        raise UsageError(
            f"{option} takes a notebook name, and {name} is an attribute: bind it to a name "
            f"first ({last} = {name}), then {option} {last}."
        )


def is_attribute(name: str) -> bool:
    """Whether ``name`` is a dotted name (``trainer.model``), which the magics cannot rebind."""
    parts = name.split(".")
    return len(parts) > 1 and all(p.isidentifier() and not keyword.iskeyword(p) for p in parts)


def _checked(value: object, kind: type[T], option: str, name: str) -> T:
    """``value`` if it is a ``kind``, else the ``UsageError`` that says what ``option`` takes."""
    if isinstance(value, kind):
        return value
    torch_name, role, example = _NAMED_KINDS[option]
    raise UsageError(
        f"{option} {name} is a {type_name(value)}, not a {torch_name}: name {role}, e.g. "
        f"{option} {example}."
    )


def compile_expression(shell: Any, expr: str, option: str) -> Any:
    """Compile a Python expression given on a magic's line, for repeated ``eval`` calls.

    Raises:
        UsageError: the text is empty, not a Python expression, or only names a function (or a
            model, a class) without calling it.
    """
    source = expr.strip()
    if not source:
        raise UsageError(f'{option} needs a Python expression in quotes, e.g. {option} "model(x)".')
    try:
        code = compile(source, f"<{option.lstrip('-')} expression>", "eval")
    except SyntaxError as exc:
        raise UsageError(
            f"{option} {source!r} is not a Python expression ({exc.msg}): give one call in "
            f'quotes, e.g. {option} "train_step()"; put several statements in a function.'
        ) from None
    called = with_call(shell.user_ns, source)
    if called is not None:
        raise UsageError(
            f'{option} "{source}" names {called.what} without calling it: each run would only '
            f'look the name up, and that is what would be timed. Call it: {option} "{called.call}".'
        )
    return code


class Uncalled(NamedTuple):
    """Code that names a callable and does nothing else, and the call it was meant to be."""

    what: str  # "a function", "a Sequential", "a class"
    call: str  # "train_step(batch)": the source with the callable's required arguments


def with_call(user_ns: dict[str, Any], source: str) -> Uncalled | None:
    """What ``source`` names and the call to write instead, where it only names a callable.

    A step written ``%tune "train_step"`` (the parentheses forgotten) evaluates to the function
    and runs nothing, so every run takes a name look-up (0.16 µs on CPU) and the fixes were
    ranked on that. Only a name or a dotted name counts (``model``, ``trainer.step``); it is
    resolved without running code (no property or ``__getattr__``), and where it cannot be,
    nothing is said. ``None`` for anything else, including any expression that calls.
    """
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError:
        return None
    value = _resolve_statically(user_ns, tree.body)
    if value is _NOT_FOUND or not callable(value):
        return None
    kind = _KINDS.get(type(value)) or ("a class" if isinstance(value, type) else "")
    return Uncalled(kind or f"a {type_name(value)}", f"{source.strip()}({_required_args(value)})")


_KINDS = {types.FunctionType: "a function", types.MethodType: "a method"}


_NOT_FOUND = object()


def _resolve_statically(user_ns: dict[str, Any], node: ast.expr) -> object:
    """The value of a name or dotted name in ``user_ns``; ``_NOT_FOUND`` for anything else."""
    if isinstance(node, ast.Name):
        return user_ns.get(node.id, _NOT_FOUND)
    if isinstance(node, ast.Attribute):
        owner = _resolve_statically(user_ns, node.value)
        if owner is _NOT_FOUND:
            return _NOT_FOUND
        try:
            value = inspect.getattr_static(owner, node.attr)
        except AttributeError:  # e.g. a submodule, which nn.Module's __getattr__ finds
            return _NOT_FOUND
        if isinstance(value, (property, staticmethod, classmethod)):
            return _NOT_FOUND
        if inspect.isfunction(value) and not isinstance(owner, type):
            in_instance = node.attr in getattr(owner, "__dict__", {})
            # Found on the class: the attribute would be the method bound to ``owner``.
            return value if in_instance else types.MethodType(value, owner)
        return value
    return _NOT_FOUND


def _required_args(value: object) -> str:
    """The names of ``value``'s required positional arguments, as a call would pass them."""
    import torch  # loaded already: the magic imported it

    target = value.forward if isinstance(value, torch.nn.Module) else value
    try:
        params = inspect.signature(target).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):  # a builtin without a signature
        return ""
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return ", ".join(
        p.name for p in params if p.kind in positional and p.default is inspect.Parameter.empty
    )


def type_name(value: object) -> str:
    """A short, readable name of a value's type ("Tensor", "list", "Linear")."""
    return type(value).__name__
