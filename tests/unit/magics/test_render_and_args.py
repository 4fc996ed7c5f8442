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
