"""NVLink data throughput of each GPU, from NVML's field values (the ``nvlink`` group).

``nvmlDeviceGetNvLinkUtilizationCounter`` is deprecated (its counters must be set up and frozen
through calls that change the GPU's state, which a monitor must not make). NVML's field values
``NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX`` and ``_RX`` are the data a GPU sent and received over
NVLink since the driver loaded, in KiB, protocol overhead excluded; with the scope ``UINT_MAX``
they are summed over all its links (``nvml.h``). A rate needs two reads: each ``read`` takes new
counters and gives the bytes per second since that GPU's previous read (the first only opens
the window), over the counters' own timestamps. ``nvidia-smi nvlink -gt d`` reads the same.

A GPU with no active NVLink (a single PCIe GPU; the links of a lone SXM GPU are down), or whose
driver answers "Not Supported", is a normal state: its fields are ``None`` with
``NO_NVLINK`` (and NVML's words) in ``unavailable``, decided once, at the GPU's first read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from jupyter_gpu.nvml.per_gpu import PerGpuReader
from jupyter_gpu.readings.records import GroupReading

NO_NVLINK = "no NVLink on this GPU"
FIELDS = ("nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s")
"""The nvlink group's metric fields (readings/catalog.py), as NVML's TX and RX counters."""
_COUNTERS = ("NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX")
ALL_LINKS = 0xFFFFFFFF
"""The scope of a field value summed over all of a GPU's links (``UINT_MAX`` in ``nvml.h``)."""
# nvmlValueType_t -> the member of nvmlValue_t that holds it.
_VALUE_MEMBER = {
    0: "dVal",
    1: "uiVal",
    2: "ulVal",
    3: "ullVal",
    4: "sllVal",
    5: "siVal",
    6: "usVal",
}


@dataclass(frozen=True, slots=True)
class Counters:
    """One read of a GPU's counters: KiB sent and received (``None``: refused), and when."""

    tx_kib: float | None
    rx_kib: float | None
    at_us: int
    """NVML's timestamp of the values (microseconds), or 0 when it gave none."""
    mono_s: float
    """``time.monotonic()`` when they were read (when NVML gave no timestamp)."""


def unavailable(reason: str) -> GroupReading:
    """A reading in which both fields are unavailable for ``reason``."""
    return GroupReading(unavailable=MappingProxyType(dict.fromkeys(FIELDS, reason)))


def _rates(before: Counters, now: Counters) -> dict[str, float | None] | None:
    """Bytes per second between two reads, by field; ``None`` where there is no rate.

    The time between them is NVML's (the values' timestamps), else this process's. No time
    passed, or a counter that went back (the driver reloaded): no rate this window.
    """
    seconds = (now.at_us - before.at_us) / 1e6 if now.at_us and before.at_us else 0.0
    if seconds <= 0:
        seconds = now.mono_s - before.mono_s
    pairs = [(FIELDS[0], before.tx_kib, now.tx_kib), (FIELDS[1], before.rx_kib, now.rx_kib)]
    known = [(name, was, kib) for name, was, kib in pairs if was is not None and kib is not None]
    if seconds <= 0 or any(kib < was for _, was, kib in known):
        return None
    return {name: round((kib - was) * 1024.0 / seconds, 0) for name, was, kib in known}


def _value(field: Any) -> float:
    """A field value's number, from the member of the union its type names."""
    member = _VALUE_MEMBER.get(int(field.valueType), "ullVal")
    return float(getattr(field.value, member))


class NvlinkReader(PerGpuReader):
    """Reads the NVLink throughput of a fixed list of NVML device handles, one device per call.

    Made as every ``PerGpuReader`` (pynvml, the handles, the log).
    """

    what = "NVLink throughput"
    missing = "no NVLink throughput"
    constants = _COUNTERS  # _previous: each GPU's last Counters

    def _why_not(self, handle: Any) -> str | None:
        """Why this GPU has no NVLink to read (``None``: it has an active link)."""
        if None in self._ids or not hasattr(self._nvml, "nvmlDeviceGetFieldValues"):
            return f"{NO_NVLINK} (this nvidia-ml-py has no NVLink throughput fields)"
        active, refusal = self._active_links(handle)
        if active:
            return None
        return NO_NVLINK if refusal is None else f"{NO_NVLINK} ({refusal})"

    def _active_links(self, handle: Any) -> tuple[int, str | None]:
        """How many of the GPU's NVLinks are up, and NVML's refusal when none answered."""
        nvml = self._nvml
        active = 0
        answered = False
        refusal: str | None = None
        for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
            try:
                active += bool(nvml.nvmlDeviceGetNvLinkState(handle, link))
                answered = True
            except nvml.NVMLError as err:  # NOT_SUPPORTED (no NVLink), INVALID_ARGUMENT (no link)
                refusal = refusal or str(err)
        return active, None if answered else refusal

    def _counters(self, index: int, handle: Any) -> tuple[Counters, dict[str, str]]:
        """The GPU's counters now, and why a field was refused (by its metric field)."""
        nvml = self._nvml
        asked = [(field_id, ALL_LINKS) for field_id in self._ids]
        got = nvml.nvmlDeviceGetFieldValues(handle, asked)
        mono = time.monotonic()
        kib: list[float | None] = []
        refused: dict[str, str] = {}
        stamp = 0
        for name, field in zip(FIELDS, got, strict=True):
            code = int(field.nvmlReturn)
            if code == 0:
                kib.append(_value(field))
                stamp = max(stamp, int(field.timestamp))
                continue
            kib.append(None)
            words = str(nvml.NVMLError(code))
            if code == nvml.NVML_ERROR_NOT_SUPPORTED:
                words = f"{NO_NVLINK} ({words})"
            refused[name] = words
            self._report(index, f"{name}: {words}")
        return Counters(kib[0], kib[1], stamp, mono), refused

    def read(self, index: int) -> GroupReading | None:
        """The bytes per second GPU ``index`` sent and received since its previous read.

        A GPU without NVLink has both fields unavailable; a GPU read for the first time (or
        whose counters went back, after a driver reload) gives ``None``: its window has only
        begun. Never raises ``NVMLError``.
        """
        nvml = self._nvml
        with self._locks[index]:
            handle = self._handles[index]
            reason = self._refusal(index, handle)
            if reason is not None:
                return unavailable(reason)
            try:
                now, refused = self._counters(index, handle)
            except nvml.NVMLError as err:
                self._report(index, str(err))
                self._previous.pop(index, None)
                if getattr(err, "value", None) in (
                    nvml.NVML_ERROR_NOT_SUPPORTED,
                    getattr(nvml, "NVML_ERROR_FUNCTION_NOT_FOUND", None),
                ):
                    self.refuse(index, f"{NO_NVLINK} ({err})")
                    return unavailable(f"{NO_NVLINK} ({err})")
                return None
            before = self._previous.get(index)
            self._previous[index] = now
            if before is None:
                return None
            values = _rates(before, now)
            if values is None or not (values or refused):
                return None
            return GroupReading(MappingProxyType(values), MappingProxyType(refused))
