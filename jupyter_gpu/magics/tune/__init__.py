"""``%tune``: the fixes for a training step, each tried and measured, ranked, with the code."""

from __future__ import annotations

from .magic import TuneMagics

__all__ = ["TuneMagics"]
