"""``%gpu --watch``: a live view of the GPUs in a cell's output, for front ends without our sidebar.

Notebook 7, VS Code and Colab show ipywidgets but not JupyterLab extensions. The view is an
ipywidgets ``HTML`` (one row per GPU: utilization, SM and tensor activity, memory, power,
temperature) with a Stop button, fed by a ``jupyter_gpu.sampling.Sampler`` in a kernel thread:
the same reads as the server's sampler, never torch. Setting a widget's value from that thread
sends the update on the kernel's IOPub channel, so it shows while a training cell runs.

A watch stops on ``%gpu --watch off``, on its Stop button, when the kernel shuts down (an
``atexit`` hook), and when its output is cleared: the widget asks the front end to count its
views (``_view_count``), and a count back to 0 after it was shown means nobody can see it. (The
front end's messages reach the kernel between cells, so a view cleared while a cell runs stops
the watch when that cell ends.)
"""

from __future__ import annotations

import atexit
import threading
import weakref
from typing import Any

from jupyter_gpu.backends.reasons import simulated_devices_from_env
from jupyter_gpu.readings import Sample
from jupyter_gpu.sampling import Entry, Sampler, SamplerOptions

from .report import watch_html

_active: weakref.WeakSet[GpuWatch] = weakref.WeakSet()


class GpuWatch:
    """One live view: a sampler thread and the ipywidgets it updates.

    Args:
        backend: ``auto``, ``nvml``, ``simulated`` or ``none``.
        interval_s: seconds between updates (0.1 to 60).

    Attributes:
        updates: how many samples the view has shown.
        max_util_pct: the highest utilization of any GPU it showed (``None`` before one).
        stopped_because: why it stopped (``None`` while it runs).
    """

    def __init__(self, backend: str = "auto", interval_s: float = 1.0) -> None:
        import ipywidgets as widgets

        self.interval_s = interval_s
        self.updates = 0
        self.max_util_pct: float | None = None
        self.last: Sample | None = None
        self.stopped_because: str | None = None
        self._lock = threading.Lock()
        self._seen_view = False
        options = SamplerOptions(
            backend=backend,
            interval_s=interval_s,
            history_s=max(interval_s, 60.0),
            cache_scan_interval_s=86_400.0,
            simulated_devices=simulated_devices_from_env(),
            gpm_interval_s=max(interval_s, 0.5),
        )
        self.sampler = Sampler(options, caches=(), on_sample=self._on_sample)
        self.html = widgets.HTML(value="<div><b>GPUs</b> starting…</div>")
        self.stop_button = widgets.Button(
            description="Stop", tooltip="Stop updating this view", layout={"width": "auto"}
        )
        self.stop_button.on_click(lambda _button: self.stop("Stop pressed"))
        self.widget = widgets.VBox([self.html, self.stop_button])
        # Ask the front end to count this widget's views: 0 again means its output was cleared.
        self.widget._view_count = 0
        self.widget.observe(self._views_changed, names="_view_count")

    @property
    def running(self) -> bool:
        """Whether the view is still being updated."""
        return self.stopped_because is None and self.sampler.running

    def start(self) -> GpuWatch:
        """Start the sampler thread (the first update comes within one interval)."""
        _active.add(self)
        self.sampler.start()
        return self

    def _on_sample(self, entry: Entry) -> None:
        """In the sampler thread: draw the sample."""
        if self.stopped_because is not None:
            return
        sample = entry.sample
        utils = [d.util_pct for d in sample.devices if d.util_pct is not None]
        with self._lock:
            self.last = sample
            self.updates += 1
            if utils:
                self.max_util_pct = max([*utils, self.max_util_pct or 0.0])
        self.html.value = watch_html(sample)

    def _views_changed(self, change: dict[str, Any]) -> None:
        count = change.get("new")
        if isinstance(count, int) and count > 0:
            self._seen_view = True
        elif count == 0 and self._seen_view:
            self.stop("its output was cleared")

    def stop(self, reason: str = "%gpu --watch off") -> None:
        """Stop updating (joins the sampler thread); the view keeps its last reading."""
        if self.stopped_because is not None:
            return
        self.stopped_because = reason
        _active.discard(self)
        if threading.current_thread().name.startswith("jupyter-gpu"):
            # Called from the sampler's own thread: it cannot join itself.
            threading.Thread(target=self.sampler.stop, name="jupyter-gpu-watch-stop").start()
        else:
            self.sampler.stop()
        if self.last is not None:
            self.html.value = watch_html(self.last, stopped=reason)
        self.stop_button.disabled = True

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)  # type: ignore[no-untyped-call]  # IPython leaves display unannotated


def start_watch(backend: str, interval_s: float) -> GpuWatch:
    """Start a watch and show it in the current output."""
    watch = GpuWatch(backend, interval_s).start()
    from IPython.display import display

    display(watch.widget)  # type: ignore[no-untyped-call]  # IPython leaves display unannotated
    return watch


def stop_all(reason: str = "%gpu --watch off") -> int:
    """Stop every running watch of this process; how many there were."""
    watches = list(_active)
    for watch in watches:
        watch.stop(reason)
    return len(watches)


def active_watches() -> list[GpuWatch]:
    """The watches still running in this process."""
    return [w for w in _active if w.running]


@atexit.register
def _stop_at_exit() -> None:
    stop_all("the kernel shut down")
