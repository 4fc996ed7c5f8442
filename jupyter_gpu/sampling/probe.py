"""``DeviceProbe``: one GPU's fast readings, again and again, behind the deadline, in a kernel.

For a magic that times the user's code and wants to say whether the GPU stayed steady while it
did (``jupyter_gpu.measure.machine``): the SM clock and the processes on the GPU, read between
rounds. NVML is opened once for the probe (within the deadline, as ``read_once`` opens it) and
shut down by :meth:`DeviceProbe.close`; a GPU that does not answer gives ``None``, never a hang.
"""

from __future__ import annotations

import logging
import time

from jupyter_gpu.readings import catalog
from jupyter_gpu.readings.backend import Backend
from jupyter_gpu.readings.deadline import READ_DEADLINE_S, DeadlineReader
from jupyter_gpu.readings.merge import device_record
from jupyter_gpu.readings.records import DeviceSample, GroupReading
from jupyter_gpu.sampling.once import _open_within

_log = logging.getLogger("jupyter_gpu")


def _same_gpu(nvml_uuid: str | None, uuid: str) -> bool:
    """NVML says ``GPU-<uuid>`` (or ``MIG-<uuid>``); torch's ``uuid`` has no prefix."""
    return nvml_uuid is not None and nvml_uuid.split("-", 1)[-1].lower() == uuid.lower()


class DeviceProbe:
    """Reads one GPU's fast readings (SM clock, processes...) on demand, each within a deadline.

    Args:
        uuid: the GPU's UUID as torch gives it (``torch.cuda.get_device_properties(i).uuid``),
            with or without NVML's ``GPU-`` prefix; ``None`` reads the only GPU, if there is one.
        deadline_s: how long one read may take before it is given up (``None`` returned).
    """

    def __init__(self, uuid: str | None, deadline_s: float = READ_DEADLINE_S) -> None:
        self._deadline_s = deadline_s
        self._backend: Backend = _open_within("auto", deadline_s)
        devices = self._backend.info().devices
        wanted = uuid.split("-", 1)[-1] if uuid and uuid.startswith(("GPU-", "MIG-")) else uuid
        if wanted is None:
            matches = list(devices) if len(devices) == 1 else []
        else:
            matches = [d for d in devices if _same_gpu(d.uuid, wanted)]
        self._info = matches[0] if matches else None
        self.index: int | None = self._info.index if self._info is not None else None
        self._reader: DeadlineReader[GroupReading] | None = None
        if self.index is not None:
            backend, tick = self._backend, catalog.layout().tick_group.name
            self._reader = DeadlineReader(
                "jupyter-gpu-probe",
                [self.index],
                lambda index: backend.read_group(tick, index),
                deadline_s,
                _log,
                what="an NVML call",
            )

    def read(self) -> DeviceSample | None:
        """The GPU's fast readings now; ``None`` if it is not found, not answering, or closed."""
        if self._reader is None or self._info is None:
            return None
        asked = time.monotonic()
        self._reader.read(self._deadline_s)
        answer = self._reader.answers().get(self._info.index)
        if answer is None or answer.at < asked:  # no answer to this read (an older one stays)
            return None
        return device_record(self._info, answer.value, {}) if answer.value.state == "ok" else None

    def close(self) -> None:
        """Stop the reader and shut NVML down (safe to call twice)."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self._backend.close()
