"""What a GPU profile leaves in the kernel's process, said once a process.

Kineto, torch's profiler library, detaches NVIDIA's CUPTI when a profile ends only where
``TEARDOWN_CUPTI=1`` is set (``cuptiTearDown_()`` in Kineto's ``CuptiActivityApi.cpp``; the
value must be "1"); otherwise CUPTI stays attached, and every later kernel launch in the process
pays for it. Notebook 04's section 5 claim failed in its own process for this
(``benchmarks/RESULTS.md``, 2026-12-06), so ``%%profile`` says it after its first GPU profile in
a process, with the figures ``docs/magics.md`` keeps ("What a profile leaves in the kernel").
"""

from __future__ import annotations

import os

#: What the note says (the H100's figures: benchmarks/RESULTS.md, 2026-12-06).
AFTER_PROFILE_NOTE = (
    "Note: after a GPU profile, Kineto (torch's profiler library) keeps CUPTI attached to this "
    "kernel's process unless TEARDOWN_CUPTI=1 is set, and each later kernel launch pays for it: "
    "on an H100 a training step of 134 launches ran 1.15x slower (1.06-1.18x) in a process that "
    "had profiled than in one that never had, and a step the GPU kept busy 1.01x slower "
    "(1.00-1.07x); two processes can also differ by themselves (jupyter-gpu's docs/magics.md). "
    "Time in a fresh kernel for figures you compare. (Said once a kernel.)"
)

#: The processes that said it (a forked child has not: its own launches pay as well).
_said_in: set[int] = set()


def cupti_torn_down() -> bool:
    """Whether Kineto tears CUPTI down when a profile ends here (it tests for the value "1")."""
    return os.environ.get("TEARDOWN_CUPTI") == "1"


def after_profile_note(*, cuda: bool) -> str | None:
    """The note, the first time a GPU profile ends in this process without a teardown."""
    if not cuda or os.getpid() in _said_in or cupti_torn_down():
        return None
    _said_in.add(os.getpid())
    return AFTER_PROFILE_NOTE
