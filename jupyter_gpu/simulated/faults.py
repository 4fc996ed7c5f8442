"""Faults the ``simulated`` backend can show on purpose: a lost GPU, a field NVML does not support.

They let a demo or a browser test show the states a real GPU can get into without a broken GPU.
Each is a short text spec (``JupyterGpu.simulated_faults``):

- ``lost:<gpu>``: the GPU is lost (as NVML's ``GPU_IS_LOST``): ``state "lost"``, no readings.
- ``error:<gpu>``: every read of the GPU fails: ``state "error"``.
- ``hang:<gpu>``: every read of the GPU blocks (the fast ones, GPM and PCIe), as a hung NVML
  call does, until the fault ends: the sampler's deadline makes it ``state "not_responding"``,
  and its GPM and PCIe readings age and turn stale, while the other GPUs keep updating.
- ``hang:init``: the backend's start-up blocks, as a hung ``nvmlInit`` or
  ``nvmlDeviceGetCount`` does, until the fault ends (``hang:init@0-30``: for the first 30 s;
  ``hang:init``: until the server stops). The server serves the host meanwhile and says that
  NVML has not answered; the GPUs come in when it ends.
- ``unsupported:<gpu>:<field>``: one field reads ``null`` with ``unavailable[field]`` set to
  ``"Not Supported (simulated)"``, as NVML's ``NOT_SUPPORTED`` does on some GPUs.

Each may end with ``@<start>`` or ``@<start>-<end>``: seconds after the sampler started when
the fault begins (and ends); without it the fault lasts from the start. ``lost:1@10`` is GPU 1
lost after 10 s; ``error:0@5-20`` is GPU 0 failing from 5 s to 20 s. A start-up hang begins at
the start: ``@0-<end>`` only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from jupyter_gpu.readings import catalog

FaultKind = Literal["lost", "error", "hang", "unsupported"]

MAX_FAULTS = 64
MAX_GPU_INDEX = 15  # the simulated backend has at most 16 devices
MAX_FAULT_TIME_S = 86_400.0


def unsupported_fields() -> tuple[str, ...]:
    """The device fields an ``unsupported`` fault can take away.

    Every reading of the catalog (``readings/catalog.py``), and the processes.
    """
    return (*(m.field for m in catalog.layout().metrics), "processes")


UNSUPPORTED_FIELDS = unsupported_fields()
"""``unsupported_fields()`` as declared when the package loads (for the option's help)."""

SIMULATED_NOT_SUPPORTED = "Not Supported (simulated)"
SIMULATED_LOST_MESSAGE = (
    "Simulated fault: this GPU is reported lost, as NVML does when a GPU falls off the bus "
    "(JupyterGpu.simulated_faults)"
)
SIMULATED_ERROR_MESSAGE = (
    "Simulated fault: every NVML read of this GPU fails (JupyterGpu.simulated_faults)"
)

START_UP = "init"
"""The ``<gpu>`` of a fault on the backend's start-up rather than on one GPU (``hang:init``)."""
_NUMBER = r"\d+(?:\.\d*)?"
_SPEC = re.compile(
    rf"^(?P<kind>[a-z]+):(?P<gpu>\d+|{START_UP})(?::(?P<field>[a-z_]+))?"
    rf"(?:@(?P<start>{_NUMBER})(?:-(?P<end>{_NUMBER}))?)?$"
)
_KINDS: dict[str, FaultKind] = {
    "lost": "lost",
    "error": "error",
    "hang": "hang",
    "unsupported": "unsupported",
}
_FORMS = (
    "lost:<gpu>, error:<gpu>, hang:<gpu> or unsupported:<gpu>:<field>, optionally "
    "@<start>[-<end>]; or hang:init, optionally @0-<end>"
)


@dataclass(frozen=True, slots=True)
class SimulatedFault:
    """One fault on one simulated GPU, active from ``start_s`` to ``end_s`` (sampler seconds).

    Attributes:
        kind: ``lost``, ``error``, ``hang`` or ``unsupported``.
        gpu: the device index; ``None`` for a fault on the backend's start-up (``hang:init``).
        field: the field taken away (``unsupported`` only), one of ``UNSUPPORTED_FIELDS``.
        start_s: seconds after the backend opened when it begins.
        end_s: seconds after the backend opened when it ends (``None``: never).
        spec: the text it was parsed from (for messages and logs).
    """

    kind: FaultKind
    gpu: int | None
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
    if match["gpu"] == START_UP:
        return _start_up_fault(spec, text, kind, field, match["start"], match["end"])
    gpu = int(match["gpu"])
    if gpu > MAX_GPU_INDEX:
        raise ValueError(f"simulated fault {spec!r}: GPU index must be 0 to {MAX_GPU_INDEX}")
    if kind == "unsupported":
        if field not in unsupported_fields():
            raise ValueError(
                f"simulated fault {spec!r}: 'unsupported' needs a field, one of "
                f"{', '.join(unsupported_fields())}"
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


def _start_up_fault(
    spec: str,
    text: str,
    kind: FaultKind,
    field: str | None,
    start: str | None,
    end: str | None,
) -> SimulatedFault:
    """``hang:init`` or ``hang:init@0-<end>``: the start-up blocks from the start until ``end``."""
    if kind != "hang" or field is not None:
        raise ValueError(
            f"simulated fault {spec!r}: only 'hang' applies to the start-up ({START_UP}): "
            "write hang:init or hang:init@0-<end>"
        )
    if start is not None and (float(start) != 0.0 or end is None):
        raise ValueError(
            f"simulated fault {spec!r}: a start-up hang begins when the server starts: write "
            "hang:init (until the server stops) or hang:init@0-<end> (answering at <end> s)"
        )
    end_s = float(end) if end is not None else None
    if end_s is not None and not 0.0 < end_s <= MAX_FAULT_TIME_S:
        raise ValueError(
            f"simulated fault {spec!r}: the end must be after 0 and at most {MAX_FAULT_TIME_S:g} s"
        )
    return SimulatedFault(kind, None, None, 0.0, end_s, text)


def start_up_hang_s(faults: Sequence[SimulatedFault], elapsed_s: float) -> float | None:
    """Seconds the start-up still blocks ``elapsed_s`` after the server started.

    ``None``: no start-up hang now; ``math.inf``: one without an end.
    """
    left: float | None = None
    for fault in faults:
        if fault.gpu is None and fault.kind == "hang" and fault.active(elapsed_s):
            this = math.inf if fault.end_s is None else fault.end_s - elapsed_s
            left = this if left is None else max(left, this)
    return left


def parse_faults(specs: list[str] | tuple[str, ...]) -> tuple[SimulatedFault, ...]:
    """Parse every spec (at most ``MAX_FAULTS``).

    Raises:
        ValueError: for the first bad spec, or too many.
    """
    if len(specs) > MAX_FAULTS:
        raise ValueError(f"at most {MAX_FAULTS} simulated faults; got {len(specs)}")
    return tuple(parse_fault(spec) for spec in specs)
