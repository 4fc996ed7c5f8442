"""Faults the ``simulated`` backend can show on purpose: a lost GPU, a field NVML does not support.

They let a demo or a browser test show the states a real GPU can get into without a broken GPU.
Each is a short text spec (``JupyterGpu.simulated_faults``):

- ``lost:<gpu>``: the GPU is lost (as NVML's ``GPU_IS_LOST``): ``state "lost"``, no readings.
- ``error:<gpu>``: every read of the GPU fails: ``state "error"``.
- ``hang:<gpu>``: every read of the GPU blocks (the fast ones, GPM and PCIe), as a hung NVML
  call does, until the fault ends: the sampler's deadline makes it ``state "not_responding"``,
  and its GPM and PCIe readings age and turn stale, while the other GPUs keep updating.
- ``unsupported:<gpu>:<field>``: one field reads ``null`` with ``unavailable[field]`` set to
  ``"Not Supported (simulated)"``, as NVML's ``NOT_SUPPORTED`` does on some GPUs.

Each may end with ``@<start>`` or ``@<start>-<end>``: seconds after the sampler started when
the fault begins (and ends); without it the fault lasts from the start. ``lost:1@10`` is GPU 1
lost after 10 s; ``error:0@5-20`` is GPU 0 failing from 5 s to 20 s.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from jupyter_gpu.readings.records import FAST_READINGS, GPM_FIELDS, PCIE_FIELDS

FaultKind = Literal["lost", "error", "hang", "unsupported"]

MAX_FAULTS = 64
MAX_GPU_INDEX = 15  # the simulated backend has at most 16 devices
MAX_FAULT_TIME_S = 86_400.0
UNSUPPORTED_FIELDS = (*FAST_READINGS, *PCIE_FIELDS, *GPM_FIELDS, "processes")
"""The device fields an ``unsupported`` fault can take away (``DeviceSample``'s readings)."""

SIMULATED_NOT_SUPPORTED = "Not Supported (simulated)"
SIMULATED_LOST_MESSAGE = (
    "Simulated fault: this GPU is reported lost, as NVML does when a GPU falls off the bus "
    "(JupyterGpu.simulated_faults)"
)
SIMULATED_ERROR_MESSAGE = (
    "Simulated fault: every NVML read of this GPU fails (JupyterGpu.simulated_faults)"
)

_NUMBER = r"\d+(?:\.\d*)?"
_SPEC = re.compile(
    rf"^(?P<kind>[a-z]+):(?P<gpu>\d+)(?::(?P<field>[a-z_]+))?"
    rf"(?:@(?P<start>{_NUMBER})(?:-(?P<end>{_NUMBER}))?)?$"
)
_KINDS: dict[str, FaultKind] = {
    "lost": "lost",
    "error": "error",
    "hang": "hang",
    "unsupported": "unsupported",
}
_FORMS = (
    "lost:<gpu>, error:<gpu>, hang:<gpu> or unsupported:<gpu>:<field>, optionally @<start>[-<end>]"
)


@dataclass(frozen=True, slots=True)
class SimulatedFault:
    """One fault on one simulated GPU, active from ``start_s`` to ``end_s`` (sampler seconds).

    Attributes:
        kind: ``lost``, ``error``, ``hang`` or ``unsupported``.
        gpu: the device index.
        field: the field taken away (``unsupported`` only), one of ``UNSUPPORTED_FIELDS``.
        start_s: seconds after the backend opened when it begins.
        end_s: seconds after the backend opened when it ends (``None``: never).
        spec: the text it was parsed from (for messages and logs).
    """

    kind: FaultKind
    gpu: int
    field: str | None = None
    start_s: float = 0.0
    end_s: float | None = None
    spec: str = ""

    def active(self, t_s: float) -> bool:
        """Whether the fault is on ``t_s`` seconds after the backend opened."""
        return t_s >= self.start_s and (self.end_s is None or t_s < self.end_s)


def parse_fault(spec: str) -> SimulatedFault:
    """Parse one spec such as ``"lost:1@10"`` or ``"unsupported:0:power_w"``.

    Raises:
        ValueError: a sentence naming what is wrong and the accepted forms.
    """
    text = spec.strip()
    match = _SPEC.match(text)
    if match is None:
        raise ValueError(f"simulated fault {spec!r} is not one of: {_FORMS}")
    kind, field = _KINDS.get(match["kind"]), match["field"]
    if kind is None:
        raise ValueError(
            f"simulated fault {spec!r}: unknown kind {match['kind']!r} "
            "(lost, error, hang or unsupported)"
        )
    gpu = int(match["gpu"])
    if gpu > MAX_GPU_INDEX:
        raise ValueError(f"simulated fault {spec!r}: GPU index must be 0 to {MAX_GPU_INDEX}")
    if kind == "unsupported":
        if field not in UNSUPPORTED_FIELDS:
            raise ValueError(
                f"simulated fault {spec!r}: 'unsupported' needs a field, one of "
                f"{', '.join(UNSUPPORTED_FIELDS)}"
            )
    elif field is not None:
        raise ValueError(f"simulated fault {spec!r}: only 'unsupported' takes a field")
    start = float(match["start"]) if match["start"] else 0.0
    end = float(match["end"]) if match["end"] else None
    if not math.isfinite(start) or start > MAX_FAULT_TIME_S:
        raise ValueError(f"simulated fault {spec!r}: start must be 0 to {MAX_FAULT_TIME_S:g} s")
    if end is not None and not start < end <= MAX_FAULT_TIME_S:
        raise ValueError(
            f"simulated fault {spec!r}: the end must be after the start and at most "
            f"{MAX_FAULT_TIME_S:g} s"
        )
    return SimulatedFault(kind, gpu, field, start, end, text)


def parse_faults(specs: list[str] | tuple[str, ...]) -> tuple[SimulatedFault, ...]:
    """Parse every spec (at most ``MAX_FAULTS``).

    Raises:
        ValueError: for the first bad spec, or too many.
    """
    if len(specs) > MAX_FAULTS:
        raise ValueError(f"at most {MAX_FAULTS} simulated faults; got {len(specs)}")
    return tuple(parse_fault(spec) for spec in specs)
