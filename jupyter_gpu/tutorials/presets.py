"""The problem sizes of the notebooks, per run mode, in one place.

The ``gpu`` sizes were chosen with ``benchmarks/gpt_step.py`` on one H200: wide enough for
tensor cores to reach a high share of their peak (heads of 128, widths that are multiples of
128), short enough that the notebooks run in minutes. ``python benchmarks/gpt_step.py --sizes
notebook`` measures exactly the ``gpu`` GPT below.
"""

from __future__ import annotations

from dataclasses import dataclass

from .gpt import GPTConfig
from .sizing import Mode, pick


@dataclass(frozen=True)
class GPTRun:
    """A GPT shape and the batch it trains with (tokens per step = batch x context)."""

    config: GPTConfig
    batch: int

    @property
    def tokens_per_step(self) -> int:
        """Tokens in one training step."""
        return self.batch * self.config.context


GPT_RUNS: dict[Mode, GPTRun] = {
    "smoke": GPTRun(GPTConfig(context=64, n_layer=2, n_head=2, d_model=64), batch=8),
    "cpu": GPTRun(GPTConfig(context=128, n_layer=4, n_head=4, d_model=128), batch=8),
    "gpu": GPTRun(GPTConfig(context=1024, n_layer=12, n_head=10, d_model=1280), batch=16),
}


def gpt_run(mode: Mode | None = None) -> GPTRun:
    """The GPT size for ``mode`` (default: the current run mode)."""
    return pick(smoke=GPT_RUNS["smoke"], cpu=GPT_RUNS["cpu"], gpu=GPT_RUNS["gpu"], mode=mode)
