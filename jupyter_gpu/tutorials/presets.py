"""The problem sizes of the notebooks, per run mode, in one place.

The ``gpu`` sizes were chosen with ``benchmarks/gpt_step.py`` on one H200: wide enough for
tensor cores to reach a high share of their peak (heads of 128, widths that are multiples of
128), short enough that the notebooks run in minutes. ``python benchmarks/gpt_step.py --sizes
notebook`` measures exactly the ``gpu`` GPT below. On a GPU, the size tier
(:mod:`.tiers`) picks the GPT: the 40gb and 80gb tiers train the ``gpu`` GPT (an fp32 step
peaks at 22.8 GiB above 2.7 GiB of weights and Adam state on the H200); the 24gb and 16gb
tiers a narrower one at half the batch, so that the fp32 step of notebooks 01 and 02 fits an
L4 or a T4.
"""

from __future__ import annotations

from dataclasses import dataclass

from .gpt import GPTConfig
from .sizing import Mode, pick
from .tiers import TierName


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


GPT_TIER_RUNS: dict[TierName, GPTRun] = {
    "16gb": GPTRun(GPTConfig(context=1024, n_layer=12, n_head=6, d_model=768), batch=8),
    "24gb": GPTRun(GPTConfig(context=1024, n_layer=12, n_head=8, d_model=1024), batch=8),
    "40gb": GPT_RUNS["gpu"],
    "80gb": GPT_RUNS["gpu"],
}


def gpt_run(mode: Mode | None = None, tier: TierName | None = None) -> GPTRun:
    """The GPT size for ``mode`` (default: the current run mode) and, on a GPU, ``tier``.

    ``tier`` defaults to the current notebook's (:func:`.session.current_tier_name`).
    """
    gpu = GPT_RUNS["gpu"]
    if pick(smoke=False, cpu=False, gpu=True, mode=mode):
        from .session import current_tier_name

        gpu = GPT_TIER_RUNS[tier or current_tier_name()]
    return pick(smoke=GPT_RUNS["smoke"], cpu=GPT_RUNS["cpu"], gpu=gpu, mode=mode)
