"""Timing GPU and CPU work: one method for every figure the project prints.

- :mod:`.timing`: one :class:`Timing` (per-call times), :func:`synchronize`, steady and
  first-call timers, the duration format and
  :func:`union_length` (a GPU's busy time from its kernels' intervals);
- :mod:`.compare`: the one way to compare variants (interleaved rounds, CUDA events, a ratio
  with its interval, the machine's steadiness);
- :mod:`.interval`: the ratio and its order-statistic interval, and the ratio's format;
- :mod:`.digits`: three significant digits that read alike at both ends of an interval;
- :mod:`.machine`: whether the machine stayed steady while it was timed;
- :mod:`.quiet`: our own background work (the compile-cache walk) waits while a figure is timed;
- :mod:`.peaks`: NVIDIA's data-sheet dense peaks per GPU and dtype, and MFU by its definition;
- :mod:`.gemms`: a training step's matrix products, from a model's ``Linear`` layers;
- :mod:`.matmul_rate`: the matmul rate measured here (those products, sustained, timed as above).

The magics (``%compile --bench``, ``%amp compare``, ``%%profile``, ``%tune``), the tutorials
(``jupyter_gpu.tutorials.timing``) and ``benchmarks/`` all time through here, so "1.33x faster
(1.29-1.37x; 95 % interval, 12 rounds)" means the same thing in a magic's report and in a
notebook's table. torch is imported only inside the functions that need it: ``%load_ext
jupyter_gpu`` must stay fast, and a process that never initialised CUDA is not made to.
"""

from __future__ import annotations

from .compare import Comparison, Variant, compare
from .interval import Ratio, fmt_ratio, paired_ratio
from .machine import MachineNotes
from .timing import (
    Timing,
    fmt_seconds,
    synchronize,
    time_back_to_back,
    time_first_call,
    time_steady,
    union_length,
)

__all__ = [
    "Comparison",
    "MachineNotes",
    "Ratio",
    "Timing",
    "Variant",
    "compare",
    "fmt_ratio",
    "fmt_seconds",
    "paired_ratio",
    "synchronize",
    "time_back_to_back",
    "time_first_call",
    "time_steady",
    "union_length",
]
