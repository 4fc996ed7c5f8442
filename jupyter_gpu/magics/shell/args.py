"""Argument parsing and notebook-namespace helpers shared by the magics.

The magics declare their options with IPython's ``@magic_arguments`` (so that ``%compile?`` is
the help) and parse them here: with POSIX quoting, so that ``--bench "model(x, y)"`` gives the
expression without its quotes, and with errors turned into ``UsageError`` sentences.
"""

from __future__ import annotations

import argparse
import keyword
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

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
    plain here, flush left.
    """
    decorate = cast("Callable[[F], F]", _ipython_args.magic_arguments())  # type: ignore[no-untyped-call]  # IPython has no types here

    def wrapper(func: F) -> F:
        func = decorate(func)
        func.__doc__ = plain_help(func.__doc__ or "")
        return func

    return wrapper


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

    return _checked(lookup(user_ns, name, "--model"), torch.nn.Module, "--model", name)


def lookup_optimizer(user_ns: dict[str, Any], name: str) -> torch.optim.Optimizer:
    """:func:`lookup` of ``--optimizer NAME``; likewise."""
    import torch  # loaded already: the magic imported it

    value = lookup(user_ns, name, "--optimizer")
    return _checked(value, torch.optim.Optimizer, "--optimizer", name)


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
        UsageError: the text is empty or not a Python expression.
    """
    source = expr.strip()
    if not source:
        raise UsageError(f'{option} needs a Python expression in quotes, e.g. {option} "model(x)".')
    try:
        return compile(source, f"<{option.lstrip('-')} expression>", "eval")
    except SyntaxError as exc:
        raise UsageError(
            f"{option} {source!r} is not a Python expression ({exc.msg}): give one call in "
            f'quotes, e.g. {option} "train_step()"; put several statements in a function.'
        ) from None


def type_name(value: object) -> str:
    """A short, readable name of a value's type ("Tensor", "list", "Linear")."""
    return type(value).__name__
