"""What a magic shows: number formats, tables and figures, published as mimebundles.

- ``render.py``: byte, percent and duration formats, tables and notes as text and HTML,
  timeline figures as plotly JSON with a small SVG fallback;
- ``figure_theme.py``: figures that read in JupyterLab's light and dark themes (the tutorials'
  plots use it too);
- ``progress_bar.py``: a bar for long work, drawn where a kernel's front end can show it
  (``%tune``, and the tutorials' fresh-process measurements).

The lowest room of the magics: it imports none of the others.
"""
