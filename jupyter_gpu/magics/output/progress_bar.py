"""A progress bar for long work in a notebook: an ipywidgets bar with a line of HTML beside it.

Drawn only where a front end can show it: a Jupyter kernel with ipywidgets installed. A widget's
value set from the running cell reaches the front end at once, over the kernel's IOPub channel,
so the bar moves while the cell runs. Elsewhere (a terminal IPython, a script) nothing is drawn,
:attr:`ProgressBar.shown` is ``False``, and the caller says its progress another way or not at
all. ``%tune`` and the tutorials' long measurements use it; each closes its bar when its result
is shown.
"""

from __future__ import annotations

from typing import Any


class ProgressBar:
    """One bar and its label, in the cell's output while it runs."""

    def __init__(self, shell: Any, total: int) -> None:
        """Draw a bar of ``total`` steps in ``shell``'s front end, where it has one."""
        self.bar: Any = None
        self.text: Any = None
        self.box: Any = None
        if shell is None or getattr(shell, "kernel", None) is None:
            return  # no front end to draw a widget in
        try:
            import ipywidgets as widgets
        except ImportError:
            return
        self.bar = widgets.IntProgress(value=0, min=0, max=max(1, total), bar_style="info")
        self.text = widgets.HTML(value="")
        self.box = widgets.HBox([self.bar, self.text])
        from IPython.display import display

        display(self.box)  # type: ignore[no-untyped-call]  # IPython leaves display unannotated

    @property
    def shown(self) -> bool:
        """Whether a bar is drawn (and not closed)."""
        return self.box is not None

    def show(self, done: int, total: int, label_html: str) -> None:
        """Move the bar to ``done`` of ``total`` and set its label (HTML, escaped by the caller)."""
        if self.box is None:
            return
        self.bar.max = max(1, total, done)
        self.bar.value = done
        self.text.value = f"<span style='font-size:12px'>{label_html}</span>"

    def close(self) -> None:
        """Remove the bar (the result follows)."""
        if self.box is not None:
            self.box.close()
            self.box = None
