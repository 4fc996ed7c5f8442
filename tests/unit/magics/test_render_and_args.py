"""Pure helpers of the magics: number formats, tables, argument parsing."""

from __future__ import annotations

import argparse

import pytest
from IPython.core.error import UsageError

from jupyter_gpu.magics.output import render as _render
from jupyter_gpu.magics.shell import args as _args
from jupyter_gpu.measure import fmt_seconds, union_length


@pytest.mark.parametrize(
    ("n", "text"),
    [(None, "n/a"), (0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (3 * 1024**3, "3.0 GiB")],
)
def test_fmt_bytes(n: int | None, text: str) -> None:
    assert _render.fmt_bytes(n) == text


def test_fmt_signed_bytes_and_seconds() -> None:
    assert _render.fmt_signed_bytes(2048) == "+2.0 KiB"
    assert _render.fmt_signed_bytes(-2048) == "-2.0 KiB"
    assert fmt_seconds(2.5e-6) == "2.50 µs"  # zeros kept: an interval's ends read alike
    assert fmt_seconds(117e-6) == "117 µs"  # no bare point ("117.")
    assert fmt_seconds(0.99996) == "1.00 s"  # not "1e+03 ms"
    assert fmt_seconds(0.0123) == "12.3 ms"
    assert fmt_seconds(21.4) == "21.40 s"
    assert _render.fmt_pct(0.724) == "72%"


def test_table_text_aligns_and_html_escapes() -> None:
    table = _render.Table(
        headers=["op", "time"],
        numeric=[False, True],
        title="t",
        sortable=True,
        rows=[["<script>", _render.Cell("1.0 ms", 0.001)], ["b", "10.0 ms"]],
    )
    lines = table.text().splitlines()
    assert lines[0] == "t"
    assert lines[2].endswith(" 1.0 ms")
    assert lines[3].endswith("10.0 ms")
    html = table.html()
    assert "&lt;script&gt;" in html
    assert "<script>" not in html
    assert 'data-v="0.001"' in html
    assert 'onclick="' in html


def test_timeline_figure_keeps_the_longest_events() -> None:
    bars = [_render.Bar("CPU", i * 1e-3, i * 1e-3 + (i + 1) * 1e-6, f"op{i}") for i in range(50)]
    fig = _render.timeline_figure(bars, "t", max_bars=10)
    kept = [label for trace in fig["data"] for label in trace["text"]]
    assert len(kept) == 10
    assert "op49" in kept
    assert "op0" not in kept
    assert "10 longest of 50" in fig["layout"]["title"]["text"]
    svg = _render.timeline_svg(bars, max_bars=5)
    assert svg.startswith("<svg")
    assert svg.count("<rect") == 5


def test_dtype_choice_explains_what_to_use() -> None:
    assert _args.dtype_choice("BF16") == "bf16"
    assert _args.dtype_choice("half") == "fp16"
    with pytest.raises(argparse.ArgumentTypeError, match="use bf16 or fp16"):
        _args.dtype_choice("int8")


def test_lookup_says_what_to_do() -> None:
    ns = {"Model": 1}
    with pytest.raises(UsageError, match="Did you mean Model"):
        _args.lookup(ns, "model")
    with pytest.raises(UsageError, match="name of a variable"):
        _args.lookup(ns, "a.b")
    assert _args.lookup(ns, "Model") == 1


def test_union_length_merges_overlaps() -> None:
    assert union_length([(0.0, 1.0), (0.5, 2.0), (3.0, 4.0)]) == pytest.approx(3.0)
    assert union_length([]) == 0.0


class _Trainer:
    def __init__(self) -> None:
        self.calls = 0
        self.model = __import__("torch").nn.Linear(2, 2)

    def step(self, batch: object, lr: float = 0.1) -> None:
        self.calls += 1

    @property
    def counted(self) -> object:
        self.calls += 1  # a property would run if the check evaluated the name
        return self.step


def _step() -> None:
    pass


@pytest.mark.parametrize(
    ("source", "what", "call"),
    [
        ("step", "a function", "step()"),
        (" trainer.step ", "a method", "trainer.step(batch)"),  # bound: no self to pass
        ("trainer.model", "a Linear", "trainer.model(input)"),  # a module: forward's arguments
        ("_Trainer", "a class", "_Trainer()"),
        ("print", "a builtin_function_or_method", "print()"),  # no signature: no arguments
    ],
)
def test_a_name_of_a_callable_is_the_call_it_was_meant_to_be(
    source: str, what: str, call: str
) -> None:
    trainer = _Trainer()
    ns = {"step": _step, "trainer": trainer, "_Trainer": _Trainer, "print": print}
    assert _args.with_call(ns, source) == _args.Uncalled(what, call)
    assert trainer.calls == 0


@pytest.mark.parametrize(
    "source",
    [
        "step()",  # calls
        "trainer.step(1)",
        "x @ w",  # work without a call
        "trainer.counted",  # a property: resolving it would run code
        "trainer.missing",
        "missing",
        "x",  # not callable
        "lambda: step()",
        "step(",  # not Python: compile_expression says so
    ],
)
def test_anything_else_is_left_to_run(source: str) -> None:
    trainer = _Trainer()
    ns = {"step": _step, "trainer": trainer, "x": 1, "w": 2}
    assert _args.with_call(ns, source) is None
    assert trainer.calls == 0


def test_compile_expression_refuses_a_step_without_its_call() -> None:
    shell = argparse.Namespace(user_ns={"train_step": _step})
    with pytest.raises(UsageError, match=r'Call it: %tune "train_step\(\)"\.$'):
        _args.compile_expression(shell, "train_step", "%tune")
    assert _args.compile_expression(shell, "train_step()", "%tune") is not None
