"""A recompile's advice follows the kind of guard that failed, from torch's own reasons.

Each case recompiles for real on the CPU (the eager backend: no C++ compiler needed) and reads
the reason dynamo recorded, as ``%compile``'s report does (``DynamoWatch``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from jupyter_gpu.magics import causes as C
from jupyter_gpu.magics.compile.dynamo_watch import DynamoWatch

pytestmark = pytest.mark.slow  # a dozen real compiles


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def first_recompile(warm: Callable[[], Any], again: Callable[[], Any]) -> tuple[str, str]:
    """Run ``warm`` (compiles), then ``again`` (recompiles): the recompile torch recorded."""
    warm()
    watch = DynamoWatch()
    watch.start()
    try:
        again()
    finally:
        report = watch.stop({})
    assert report is not None
    assert report.recompiles, "no recompile happened"
    first = report.recompiles[0]
    return first.function, first.reason


def advice(recompile: tuple[str, str]) -> str:
    text = "\n".join(
        e.text
        for e in C.explain(
            C.Evidence("report", compile=C.CompileFacts(graphs=1, recompiles=(recompile,)))
        )
    )
    assert recompile[1].splitlines()[0][:60] in text  # the guard itself is quoted
    return text


def advice_on(warm: Callable[[], Any], again: Callable[[], Any], guard: str) -> str:
    """The advice on the recompile ``again`` causes after ``warm``, whose reason names ``guard``."""
    found = first_recompile(warm, again)
    assert guard in found[1]
    return advice(found)


def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def test_two_backends_sharing_one_code_object_are_not_told_about_shapes() -> None:
    x = torch.randn(3)
    text = advice_on(
        lambda: torch.compile(double, backend="eager")(x),
        lambda: torch.compile(double, backend="aot_eager")(x),
        guard="BACKEND_MATCH",
    )
    assert "another backend or other options" in text
    assert "torch._dynamo.reset()" in text
    assert "--dynamic" not in text
    assert "shape" not in text.replace("shapes have nothing to do with it", "")


def test_a_shape_change_is_told_about_shapes_and_dynamic() -> None:
    compiled = torch.compile(double, backend="eager")
    text = advice_on(
        lambda: compiled(torch.randn(4)), lambda: compiled(torch.randn(5)), guard="size mismatch"
    )
    assert "shape differed" in text
    assert "--dynamic" in text


def test_strides_dtype_and_requires_grad_each_name_what_changed() -> None:
    a = torch.randn(4, 4)
    compiled = torch.compile(double, backend="eager")
    stride = first_recompile(lambda: compiled(a), lambda: compiled(a.t()))
    assert "stride mismatch" in stride[1]
    assert ".contiguous()" in advice(stride)
    torch._dynamo.reset()
    dtype = first_recompile(lambda: compiled(a), lambda: compiled(a.double()))
    assert "dtype mismatch" in dtype[1]
    assert "cast inputs to one dtype" in advice(dtype)
    torch._dynamo.reset()
    grad = first_recompile(lambda: compiled(a), lambda: compiled(a.clone().requires_grad_()))
    assert "requires_grad mismatch" in grad[1]
    assert "needed gradients in one call" in advice(grad)
    for text in (advice(stride), advice(dtype), advice(grad)):
        assert "--dynamic" not in text


def test_global_state_names_the_setting() -> None:
    compiled = torch.compile(lambda x: x.sin(), backend="eager")
    x = torch.randn(3)

    def under_no_grad() -> None:
        with torch.no_grad():
            compiled(x)

    text = advice_on(lambda: compiled(x), under_no_grad, guard="GLOBAL_STATE changed: grad_mode")
    assert "grad_mode (autograd on or off" in text
    assert "--dynamic" not in text
    torch._dynamo.reset()

    def under_autocast() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            compiled(x)

    assert "(autocast (%amp on, torch.autocast))" in advice_on(
        lambda: compiled(x), under_autocast, guard="autocast(cpu)_enabled"
    )


HELPER_SOURCE = "def helper(x):\n    return x + {n}\n\ndef uses_helper(x):\n    return helper(x)\n"


def test_an_object_replaced_by_running_its_cell_again_is_told_so() -> None:
    namespace: dict[str, Any] = {}
    exec(HELPER_SOURCE.format(n=1), namespace)  # a cell, as IPython runs it
    compiled = torch.compile(namespace["uses_helper"], backend="eager")
    x = torch.randn(3)

    def cell_runs_again() -> None:
        exec(HELPER_SOURCE.format(n=2).split("\n\ndef uses")[0], namespace)
        compiled(x)

    text = advice_on(lambda: compiled(x), cell_runs_again, guard="___check_obj_id")
    assert "by its identity" in text
    assert "--dynamic" not in text


def count(x: torch.Tensor, items: Any) -> torch.Tensor:
    return x * len(items)


def scale(x: torch.Tensor, factor: Any) -> torch.Tensor:
    return x * factor


def test_a_type_a_python_value_and_a_training_flag_each_get_their_own_advice() -> None:
    x = torch.randn(3)
    compiled = torch.compile(count, backend="eager")
    assert "the same type every call" in advice_on(
        lambda: compiled(x, [1, 2]), lambda: compiled(x, (1, 2)), guard="___check_type_id"
    )
    torch._dynamo.reset()
    compiled = torch.compile(scale, backend="eager")
    text = advice_on(lambda: compiled(x, 2), lambda: compiled(x, 3), guard="factor == 2")
    assert "specialised on a Python value (factor == 2)" in text
    torch._dynamo.reset()
    dropout = torch.nn.Dropout(0.5)
    compiled_dropout = torch.compile(dropout, backend="eager")
    assert "model.train() / model.eval()" in advice_on(
        lambda: compiled_dropout(x),
        lambda: (dropout.eval(), compiled_dropout(x)),
        guard=".training == True",
    )


def test_an_unknown_guard_is_quoted_with_general_advice() -> None:
    text = advice(("step", "0/1: ___some_new_guard(L['x'], 7)"))
    assert "___some_new_guard(L['x'], 7)" in text
    assert "Keep what that guard checks the same" in text
    assert "--dynamic" not in text
