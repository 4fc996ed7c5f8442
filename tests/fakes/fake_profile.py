"""A stopped ``torch.profiler.profile`` as the profile analysis reads it, over real events.

Tests build real ``FunctionEvent`` lists (``torch.autograd.profiler_util``) and hand them to
``analyse`` through this, without running a profiler.
"""

from __future__ import annotations

from typing import Any

from torch.autograd.profiler_util import EventList


class FakeProfile:
    """What the analysis reads of a stopped ``torch.profiler.profile``."""

    def __init__(self, events: EventList) -> None:
        self._events = events

    def events(self) -> EventList:
        return self._events

    def key_averages(self) -> Any:
        return self._events.key_averages()
