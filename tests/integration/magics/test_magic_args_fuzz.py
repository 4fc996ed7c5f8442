"""Hypothesis on every magic's arguments, in a real IPython shell (CUDA hidden, as elsewhere).

Arguments are drawn from each magic's own options (read from its parser) mixed with values and
junk. Whatever they are, a magic either runs or raises ``UsageError``: never another exception.
After a ``UsageError`` the notebook is as it was: no new names, autocast and TF32 untouched,
no ``%amp on`` hooks left behind. The cell's body is ``z = 1``, so a cell that ran is visible.
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest
import torch
from IPython.core.error import UsageError

from .conftest import Shell

hypothesis = pytest.importorskip("hypothesis")
st = pytest.importorskip("hypothesis.strategies")

# Magics not fuzzed here, and why (a new magic is fuzzed by default).
SKIP = {"torchrun": "starts processes by design; its parser is tested in its own tests"}
VALUES = [
    "0",
    "1",
    "-1",
    "2",
    "3",
    "2.5",
    "1e309",
    "nan",
    "inf",
    "-0",
    "10000000000",
    "bf16",
    "fp16",
    "fp32",
    "tf32",
    "int8",
    "cpu",
    "cuda",
    "cuda:1",
    "mps",
    "on",
    "off",
    "status",
    "compare",
    "default",
    "max-autotune",
    "reduce-overhead",
    "eager",
    "inductor",
    "self_cpu",
    "self_gpu",
    "total",
    "name",
    "speed",
    "model",
    "opt",
    "x",
    "missing_name",
    "train_step()",
    "1/0",
    "'a b'",
    '"',
    "'",
    "=",
    "--",
    "-",
    "-x",
    "--no-such-flag",
    "/nonexistent/dir/t.json",
    "é",
    "💥",
    "\\",
    "$HOME",
    ";",
]
PREFIX = "_fuzz_"


def magics_of(shell: Shell) -> list[tuple[str, str, list[str]]]:
    """(kind, name, option strings) of every magic this package registers."""
    found = []
    for kind in ("line", "cell"):
        for name, fn in sorted(shell.ip.magics_manager.magics[kind].items()):
            owner = getattr(fn, "__self__", None)
            if "jupyter_gpu" not in type(owner).__module__ or name in SKIP:
                continue
            parser = getattr(fn, "parser", None)
            options = [o for a in parser._actions for o in a.option_strings] if parser else []
            found.append((kind, name, options))
    return found


def state(shell: Shell) -> tuple[Any, ...]:
    names = {k for k in shell.ip.user_ns if not k.startswith("_") and k not in ("In", "Out")}
    amp = shell.ip.magics_manager.registry.get("AmpMagics")
    return (
        frozenset(names),
        torch.is_autocast_enabled("cpu"),
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.get_float32_matmul_precision(),
        getattr(amp, "hooks", None) is None,
    )


def raised_by_user_code(error: BaseException) -> bool:
    """Whether the innermost frame is code the notebook gave (compiled, ``<...>``)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename.startswith("<")


def frames_below_the_magic(error: BaseException) -> list[str]:
    """The functions of the extension a usage error's traceback still holds, past its entry.

    IPython keeps the last error until the next one, and each frame keeps its variables alive
    (the model a magic looked up, among others).
    """
    names = []
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if "jupyter_gpu" in code.co_filename and code.co_name != "without_frames":
            names.append(code.co_name)
        tb = tb.tb_next
    return names


def reset(shell: Shell) -> None:
    """Undo what a magic that ran may have switched on (as a user would)."""
    for line in ("%amp off", "%gpu --watch off"):
        shell.run(line)
    for name in [k for k in shell.ip.user_ns if k in ("z", "scaler")]:
        del shell.ip.user_ns[name]


def test_every_magic_is_fuzzed(shell: Shell) -> None:
    names = {name for _, name, _ in magics_of(shell)}
    assert {"amp", "compile", "gpu", "memsummary", "profile"} <= names, names


@pytest.mark.slow
@hypothesis.settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=list(hypothesis.HealthCheck),
)
@hypothesis.given(data=st.data())
def test_bad_arguments_are_usage_errors_and_change_nothing(shell: Shell, data: Any) -> None:
    kind, name, options = data.draw(st.sampled_from(magics_of(shell)), label="magic")
    tokens = data.draw(
        st.lists(
            st.one_of(
                st.sampled_from(options or ["-q"]),
                st.sampled_from(VALUES),
                st.text(max_size=8),
            ),
            max_size=6,
        ),
        label="tokens",
    )
    # One line: IPython splits a cell at every line boundary (form feed, \x1e, ...) before a
    # magic sees it, and the rest would be Python, not arguments.
    args = " ".join(" ".join(token.splitlines()) for token in tokens)
    source = f"%%{name} {args}\nz = 1" if kind == "cell" else f"%{name} {args}"
    before = state(shell)
    ran = shell.run(source)
    try:
        error = ran.error
        if error is None or isinstance(error, UsageError):
            if isinstance(error, UsageError):
                assert str(error).strip(), source  # says what to do
                assert state(shell) == before, source
                assert frames_below_the_magic(error) == [], source
            return
        # The other acceptable error is the user's own: a magic that takes a statement
        # (`%profile STATEMENT`) runs it, and it may not compile or may raise.
        if isinstance(error, SyntaxError) or raised_by_user_code(error):
            return
        raise AssertionError(f"{source!r} raised {error!r}, not a UsageError\n{ran.text[-2000:]}")
    finally:
        reset(shell)


@pytest.mark.parametrize("quote", ["'", '"'])
def test_an_unbalanced_quote_is_a_usage_error_everywhere(shell: Shell, quote: str) -> None:
    for kind, name, _ in magics_of(shell):
        source = f"%%{name} --x {quote}a\nz = 1" if kind == "cell" else f"%{name} --x {quote}a"
        with pytest.raises(ValueError, match="quotation"):
            shlex.split(source.splitlines()[0])  # what the magic's parser meets
        before = state(shell)
        message = shell.usage_error(source)
        assert message.strip()
        assert state(shell) == before, source
        assert frames_below_the_magic(shell.ip.last_execution_result.error_in_exec) == []
