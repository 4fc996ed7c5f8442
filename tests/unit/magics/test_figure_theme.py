"""The magics' and the tutorials' plotly figures draw no white block in a dark theme."""

from __future__ import annotations

from typing import Any

from IPython.core.interactiveshell import InteractiveShell

from jupyter_gpu.magics.output.figure_theme import (
    FALLBACK_TEXT_COLOR,
    PLOTLY_FONTS,
    THEME_FONT_FAMILY,
    TRANSPARENT,
    follow_theme,
)
from jupyter_gpu.magics.output.render import PLOTLY_MIMETYPE, Bar, publish, timeline_figure
from jupyter_gpu.tutorials.plots import line_chart


def _assert_follows_the_theme(figure: dict[str, Any]) -> None:
    layout = figure["layout"]
    # plotly's defaults are a white paper and plot area ("#fff"): none is drawn.
    assert layout["paper_bgcolor"] == TRANSPARENT
    assert layout["plot_bgcolor"] == TRANSPARENT
    assert layout["legend"]["bgcolor"] == TRANSPARENT
    assert layout["font"] == {"family": THEME_FONT_FAMILY, "color": FALLBACK_TEXT_COLOR}
    assert layout["hoverlabel"]["font"]["family"] == PLOTLY_FONTS  # plotly's own contrast
    for axis in ("xaxis", "yaxis"):
        assert layout[axis]["gridcolor"].startswith("rgba(128, 128, 128, ")


def test_the_font_names_jupyterlabs_variable_with_plotlys_fonts_as_fallback() -> None:
    # What labextension/style/base.css matches to give the text the theme's colour.
    assert THEME_FONT_FAMILY.startswith("var(--jp-ui-font-family, ")
    assert THEME_FONT_FAMILY.endswith(f"{PLOTLY_FONTS})")


def test_what_a_figure_sets_itself_wins_and_nothing_is_changed_in_place() -> None:
    figure = {
        "data": [],
        "layout": {
            "title": {"text": "t"},
            "font": {"size": 10},
            "yaxis": {"autorange": "reversed", "gridcolor": "red"},
            "yaxis2": {"overlaying": "y"},
        },
    }
    themed = follow_theme(figure)
    layout = themed["layout"]
    assert layout["title"] == {"text": "t"}
    assert layout["font"] == {"size": 10, "family": THEME_FONT_FAMILY, "color": FALLBACK_TEXT_COLOR}
    assert layout["yaxis"]["autorange"] == "reversed"
    assert layout["yaxis"]["gridcolor"] == "red"
    assert layout["yaxis2"]["overlaying"] == "y"
    assert layout["yaxis2"]["zerolinecolor"].startswith("rgba(128, 128, 128, ")
    assert "paper_bgcolor" not in figure["layout"]  # the caller's figure is untouched
    assert figure["layout"]["font"] == {"size": 10}


def test_every_published_figure_of_the_magics_follows_the_theme() -> None:
    shell = InteractiveShell.instance()
    shown: list[dict[str, Any]] = []

    def keep(data: dict[str, Any], *_: Any, **__: Any) -> None:
        shown.append(data)

    publisher = shell.display_pub
    original = publisher.publish
    publisher.publish = keep  # type: ignore[method-assign]
    try:
        publish("t", None, timeline_figure([Bar("cpu", 0.0, 0.001, "op")], "ops"))
    finally:
        publisher.publish = original  # type: ignore[method-assign]
    (data,) = shown
    _assert_follows_the_theme(data[PLOTLY_MIMETYPE])


def test_the_tutorials_charts_follow_the_theme() -> None:
    chart = line_chart({"loss": [2.0, 1.0]}, title="loss")
    _assert_follows_the_theme(chart._repr_mimebundle_()["application/vnd.plotly.v1+json"])
