"""Watch the GPU while a cell runs: what the sidebar's charts show, as numbers in the notebook.

:class:`GpuWatch` runs the project's own sampler (``jupyter_gpu.sampling.Sampler``, NVML
through one background thread) at 10 Hz and summarises the samples that fall inside each
labelled window, e.g. "tiny kernels: utilization 100%, 2% of the matrix-product peak".
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass

from jupyter_gpu.sampling import Sampler, SamplerOptions


@dataclass(frozen=True)
class WindowStats:
    """What the sampler saw of one GPU during a window.

    ``None`` fields: NVML could not read them (or there is no GPU); ``samples`` says how many
    readings the figures rest on.
    """

    label: str
    duration_s: float
    samples: int
    util_pct_mean: float | None
    mem_used_bytes_max: int | None
    power_w_mean: float | None
    sm_clock_mhz_min: int | None = None
    sm_clock_mhz_max: int | None = None
    temperature_c_max: float | None = None


class GpuWatch:
    """A 10 Hz sampler of GPU ``device_index`` with labelled time windows.

    Use as a context manager (``with GpuWatch() as watch:``), then ``with watch.window("a"):``
    around each workload and ``watch.stats("a")`` afterwards. Without a GPU every window has
    ``samples == 0`` and :attr:`reason` says why.
    """

    def __init__(self, device_index: int = 0, interval_s: float = 0.1) -> None:
        options = SamplerOptions(interval_s=interval_s, history_s=600, cache_scan_interval_s=3600)
        self.device_index = device_index
        self._sampler = Sampler(options, caches=())
        self._windows: dict[str, tuple[float, float]] = {}

    def __enter__(self) -> GpuWatch:
        self._sampler.start()
        self._sampler.ready.wait(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._sampler.stop()

    @property
    def reason(self) -> str | None:
        """Why there are no GPU readings (``None`` when there are)."""
        info = self._sampler.info
        if info is None:
            return "the sampler did not start"
        if not info.devices:
            return info.reason or "no GPU found"
        return None

    @contextlib.contextmanager
    def window(self, label: str) -> Iterator[None]:
        """Mark the time between entry and exit as ``label`` (the caller synchronises CUDA)."""
        start = time.time()
        try:
            yield
        finally:
            # One more tick so that the last part of the window is sampled too.
            time.sleep(self._sampler.options.interval_s * 1.5)
            self._windows[label] = (start, time.time())

    def stats(self, label: str) -> WindowStats:
        """Summary of the samples inside window ``label``.

        Raises:
            KeyError: no window of that name was recorded.
        """
        start, end = self._windows[label]
        utils: list[float] = []
        mems: list[int] = []
        powers: list[float] = []
        clocks: list[int] = []
        temperatures: list[float] = []
        for entry in self._sampler.history.since(start):
            if entry.ts > end:
                break
            for device in entry.sample.devices:
                if device.index != self.device_index:
                    continue
                if device.util_pct is not None:
                    utils.append(device.util_pct)
                if device.mem_used_bytes is not None:
                    mems.append(int(device.mem_used_bytes))
                if device.power_w is not None:
                    powers.append(device.power_w)
                if device.sm_clock_mhz is not None:
                    clocks.append(int(device.sm_clock_mhz))
                if device.temperature_c is not None:
                    temperatures.append(device.temperature_c)
        return WindowStats(
            label=label,
            duration_s=end - start,
            samples=len(utils),
            util_pct_mean=statistics.fmean(utils) if utils else None,
            mem_used_bytes_max=max(mems) if mems else None,
            power_w_mean=statistics.fmean(powers) if powers else None,
            sm_clock_mhz_min=min(clocks) if clocks else None,
            sm_clock_mhz_max=max(clocks) if clocks else None,
            temperature_c_max=max(temperatures) if temperatures else None,
        )
