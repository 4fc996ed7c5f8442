"""Plotly figures that read in JupyterLab's light and dark themes alike.

The kernel cannot know the theme: it is the browser's, and it can change after a figure is
drawn. JupyterLab's plotly renderer (the ``jupyterlab-plotly`` extension that ships with the
``plotly`` package, 7.1 here) draws a figure's layout as given, and plotly's defaults are a
white paper and plot area with dark grey text: a white block in the dark theme. So the figures
of the magics and the tutorials

- draw no background: transparent paper, plot area, legend and mode bar, so the output area's
  own colour (the theme's) shows through;
- draw grid, zero and tick lines in a half-transparent grey, visible on light and dark;
- name JupyterLab's font variable as their font family (``var(--jp-ui-font-family, ...)``,
  plotly's own fonts as the fallback), and the monitor's stylesheet colours the text of the
  figures whose font names that variable with the theme's text colour (plotly writes each
  text's colour inline, so only a stylesheet rule can make it follow the theme). Hover labels
  keep plotly's own font, so their text keeps plotly's contrast with the label's colour.

Where that stylesheet is absent (another frontend, an HTML export) the text keeps a mid grey
that reads on a light and a dark background alike.
"""

from __future__ import annotations

import copy
import re
from typing import Any

#: plotly's own font list (its ``layout.font.family`` default).
PLOTLY_FONTS = '"Open Sans", verdana, arial, sans-serif'
#: JupyterLab's interface font, plotly's fonts where the variable is not defined.
THEME_FONT_FAMILY = f"var(--jp-ui-font-family, {PLOTLY_FONTS})"
#: Text where no stylesheet sets the theme's colour: mid grey, legible on white and on black.
FALLBACK_TEXT_COLOR = "rgb(128, 128, 128)"
TRANSPARENT = "rgba(0, 0, 0, 0)"
_GRID = "rgba(128, 128, 128, 0.25)"
_LINE = "rgba(128, 128, 128, 0.6)"
_AXIS = re.compile(r"[xy]axis\d*")

_LAYOUT: dict[str, Any] = {
    "paper_bgcolor": TRANSPARENT,
    "plot_bgcolor": TRANSPARENT,
    "font": {"family": THEME_FONT_FAMILY, "color": FALLBACK_TEXT_COLOR},
    "legend": {"bgcolor": TRANSPARENT},
    "hoverlabel": {"font": {"family": PLOTLY_FONTS}},
    "modebar": {"bgcolor": TRANSPARENT, "color": _LINE, "activecolor": FALLBACK_TEXT_COLOR},
}
_AXIS_STYLE: dict[str, Any] = {
    "gridcolor": _GRID,
    "zerolinecolor": _LINE,
    "linecolor": _LINE,
    "tickcolor": _LINE,
}


def _under(defaults: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """``given`` with ``defaults`` filled in where it says nothing (nested dicts merged)."""
    merged = copy.deepcopy(defaults)
    for key, value in given.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _under(merged[key], value)
        else:
            merged[key] = value
    return merged


def follow_theme(figure: dict[str, Any]) -> dict[str, Any]:
    """A copy of the plotly ``figure`` (a JSON dict) drawn to follow JupyterLab's theme.

    What the figure's own layout sets wins; only what it leaves to plotly's defaults changes
    (backgrounds, fonts, line colours of every ``xaxis``/``yaxis``).
    """
    layout = dict(figure.get("layout") or {})
    for name in {"xaxis", "yaxis", *(k for k in layout if _AXIS.fullmatch(k))}:
        layout[name] = _under(_AXIS_STYLE, layout.get(name) or {})
    return {**figure, "layout": _under(_LAYOUT, layout)}
