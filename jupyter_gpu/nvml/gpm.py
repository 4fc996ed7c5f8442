"""SM, tensor-core and DRAM activity from NVML's GPU Performance Monitoring (GPM, Hopper+).

NVML's ``utilization`` says only that *a* kernel ran during the window: a GPU at 100 % can be
doing little. GPM counts what the SMs did. It needs two samples taken some time apart: each
``read`` takes a new GPM sample of one GPU (``nvmlGpmSampleGet``) and asks NVML for the metrics
between it and that GPU's previous one (``nvmlGpmMetricsGet``), so the values are averages over
the time between two reads. The first read of a GPU only primes it.

GPUs before Hopper (and vGPUs) answer ``nvmlGpmQueryDeviceSupport`` with "not supported": their
fields are ``None`` with ``"Not Supported"`` in ``unavailable``, as other fields NVML refuses.
``dcgmi dmon -e 1002,1003,1004,1005`` reads the same four metrics through DCGM.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

from jupyter_gpu.nvml.per_gpu import PerGpuReader
from jupyter_gpu.readings.records import GroupReading

NOT_SUPPORTED = "Not Supported"

# The gpm group's metric fields (readings/catalog.py) -> the name of NVML's metric id constant
# (nvml.h, nvmlGpmMetricId_t).
_METRICS: tuple[tuple[str, str], ...] = (
    ("sm_active_pct", "NVML_GPM_METRIC_SM_UTIL"),
    ("sm_occupancy_pct", "NVML_GPM_METRIC_SM_OCCUPANCY"),
    ("tensor_active_pct", "NVML_GPM_METRIC_ANY_TENSOR_UTIL"),
    ("dram_bw_pct", "NVML_GPM_METRIC_DRAM_BW_UTIL"),
)
GPM_FIELDS = tuple(f for f, _ in _METRICS)


def unsupported(reason: str = NOT_SUPPORTED) -> GroupReading:
    """A reading in which every GPM field is unavailable for ``reason``."""
    return GroupReading(unavailable=MappingProxyType(dict.fromkeys(GPM_FIELDS, reason)))


class GpmReader(PerGpuReader):
    """Reads the GPM metrics of a fixed list of NVML device handles, one device per call.

    Made as every ``PerGpuReader`` (pynvml, the handles, the log).
    """

    what = "NVML cannot read GPM metrics"
    missing = "no GPM metrics (SM/tensor activity)"
    constants = tuple(const for _, const in _METRICS)

    def __init__(
        self, nvml: Any, handles: Sequence[Any], log: logging.Logger | None = None
    ) -> None:
        super().__init__(nvml, handles, log)  # _previous: each GPU's last GPM sample
        self._closed = False
        self._spare: dict[int, Any] = {}  # index -> a sample buffer to reuse

    def _why_not(self, handle: Any) -> str | None:
        """Why this GPU has no GPM (``None``: it has): NVML's ``nvmlGpmQueryDeviceSupport``."""
        nvml = self._nvml
        if None in self._ids or not hasattr(nvml, "nvmlGpmQueryDeviceSupport"):
            return f"{NOT_SUPPORTED} (this nvidia-ml-py has no GPM)"
        try:
            support = nvml.nvmlGpmQueryDeviceSupport(handle)
        except nvml.NVMLError as err:
            return str(err)
        except (AttributeError, TypeError) as err:  # an NVML library without GPM symbols
            return f"{NOT_SUPPORTED} ({err})"
        return None if int(support.isSupportedDevice) else NOT_SUPPORTED

    def _metrics(self, earlier: Any, later: Any) -> GroupReading:
        nvml = self._nvml
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(_METRICS)
        request.sample1 = earlier
        request.sample2 = later
        for i, metric_id in enumerate(self._ids):
            request.metrics[i].metricId = metric_id
        nvml.nvmlGpmMetricsGet(request)
        values: dict[str, float | None] = {}
        unavailable: dict[str, str] = {}
        for i, (name, _) in enumerate(_METRICS):
            metric = request.metrics[i]
            code = int(metric.nvmlReturn)
            if code != 0:
                unavailable[name] = str(nvml.NVMLError(code))
                continue
            value = float(metric.value)
            # Counters can overshoot 100 by rounding: clamp into the documented 0 to 100.
            values[name] = round(min(100.0, max(0.0, value)), 2)
        return GroupReading(MappingProxyType(values), MappingProxyType(unavailable))

    def read(self, index: int) -> GroupReading | None:
        """A new GPM sample of GPU ``index`` and the metrics since its previous one.

        A GPU without GPM has every field unavailable; a GPU read for the first time (or after
        a failed read) gives ``None``: its window has only begun. Never raises ``NVMLError``.
        """
        nvml = self._nvml
        with self._locks[index]:
            if self._closed:
                return None
            handle = self._handles[index]
            reason = self._refusal(index, handle)
            if reason is not None:
                return unsupported(reason)
            sample = self._spare.pop(index, None)
            try:
                if sample is None:
                    sample = nvml.nvmlGpmSampleAlloc()
                nvml.nvmlGpmSampleGet(handle, sample)
            except nvml.NVMLError as err:
                self._report(index, err)
                if sample is not None:
                    self._spare[index] = sample
                self._drop_previous(index)
                if getattr(err, "value", None) == nvml.NVML_ERROR_NOT_SUPPORTED:
                    self.refuse(index, str(err))
                    return unsupported(str(err))
                return None
            previous = self._previous.get(index)
            self._previous[index] = sample
            if previous is None:
                return None
            self._spare[index] = previous
            try:
                return self._metrics(previous, sample)
            except nvml.NVMLError as err:
                self._report(index, err)
                return unsupported(str(err))

    def _drop_previous(self, index: int) -> None:
        previous = self._previous.pop(index, None)
        if previous is not None:
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlGpmSampleFree(previous)

    def close(self) -> set[int]:
        """Free NVML's GPM sample buffers (before ``nvmlShutdown``); no read after this.

        Never waits for a read: the buffers of a GPU whose read is in a call (hung, perhaps)
        are left, and their GPUs returned; call again once those calls are out. Safe to call
        twice.
        """
        self._closed = True
        return {i for i in range(len(self._handles)) if not self._free(i)}

    def _free(self, index: int) -> bool:
        if not self._locks[index].acquire(blocking=False):
            return False  # a read is in a call with them
        try:
            for samples in (self._previous, self._spare):
                sample = samples.pop(index, None)
                if sample is not None:
                    with contextlib.suppress(self._nvml.NVMLError):
                        self._nvml.nvmlGpmSampleFree(sample)
        finally:
            self._locks[index].release()
        return True
