"""16-bit autocast with channels_last: the pair tensor cores run convolutions fastest in.

Alone, each can give nothing on a convolution net: autocast in NCHW leaves cuDNN transposing
every 16-bit activation to the NHWC layout its tensor-core kernels read and back (the H200's
ResNet-50: bf16 autocast 0.88x, slower), and channels_last in float32 has no 16-bit kernels to
feed (1.02x). Together they are what NVIDIA and PyTorch document for tensor-core convolutions:
NVIDIA's "Convolutional Layers User's Guide", *Tensor Layouts In Memory: NCHW vs NHWC*
(https://docs.nvidia.com/deeplearning/performance/dl-performance-convolutional/index.html:
"We recommend using the NHWC format where possible"; its tensor-core kernels take NHWC and
NCHW pays transposes), and PyTorch's tutorial "Channels Last Memory Format in PyTorch"
(https://docs.pytorch.org/tutorials/intermediate/memory_format_tutorial.html#performance-gains:
the gains are on tensor cores in reduced precision, 22 % on ResNet-50 with AMP on a V100); the
docs of ``torch.nn.utils.convert_conv2d_weight_memory_format`` say the same of NHWC kernels,
"for fp16 data on CUDA devices with compute capability >= 7.0".

It is an alternative to each alone (``Fix.replaces``, as the compile modes are to each other):
timed on top of the kept fixes less a kept autocast or channels_last, never stacked with either;
the stack takes it where its gain beats the kept singles' (``magic._to_stack``). Tried where both
would be (autocast's and channels_last's conditions), right after autocast in the plan.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from .conv import ChannelsLast
from .precision import Autocast

if TYPE_CHECKING:
    from .evidence import Evidence
    from .fixes import TuneSession


class AutocastChannelsLast(Autocast):
    """Autocast (bf16, or fp16 where the GPU does not compute bf16) with channels_last weights."""

    family = "precision"
    key = "autocast_channels_last"
    order = 26  # after autocast's line in the code cell, before channels_last's
    exact = False
    alternative = True
    replaces: ClassVar[tuple[str, ...]] = ("autocast", "channels_last")

    def __init__(self, dtype: str, device: str) -> None:
        super().__init__(dtype, device)
        self.name = f"{dtype} autocast with channels_last"
        self.channels = ChannelsLast()

    def explain_skip(self, model: Any, ev: Evidence) -> str | None:
        """Why not (``None``: try it): where either alone would not be tried.

        The model's own reason first (no convolution weights; channels_last already): a fact of
        the model, where the profile's shares move from run to run.
        """
        return self.channels.model_skip(model) or self.why_not(ev) or self.channels.profile_skip(ev)

    @contextlib.contextmanager
    def applied(self, s: TuneSession) -> Iterator[None]:
        with self.channels.applied(s):  # autocast itself opens per step (``wrap``)
            yield

    def code(self, s: TuneSession) -> list[str]:
        return [*super().code(s), *self.channels.code(s)]

    def apply(self, s: TuneSession) -> str:
        return f"{super().apply(s)}; {self.channels.apply(s)}"
