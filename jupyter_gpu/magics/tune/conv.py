"""Convolution fixes: ``channels_last`` weights and ``cudnn.benchmark``.

- **channels_last** (NHWC): the memory format tensor cores read convolutions in without
  transposing (PyTorch's tutorial "(beta) Channels Last Memory Format in PyTorch"; a
  convolution whose weight is channels_last gives a channels_last output). Tried where
  convolutions hold a measured share of the step; the model's 4-D weights are converted for
  each timed block and converted back after it (the step's own input stays as it is: the code
  cell says to convert it too).
- **cudnn.benchmark**: cuDNN times its convolution algorithms for each new input shape and keeps
  the fastest (``torch.backends.cudnn.benchmark``; PyTorch's performance tuning guide). CUDA
  only; the first calls of each shape pay for the timing (they fall in the warm-up).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from jupyter_gpu.magics.output.render import fmt_pct

from .evidence import SMALL_SHARE
from .fixes import Fix

if TYPE_CHECKING:
    from .evidence import Evidence
    from .fixes import TuneSession


def conv_share(ev: Evidence) -> float:
    """The convolutions' share of one profiled step's work."""
    return ev.matmul_share(conv=True)


def _no_convs(ev: Evidence) -> str | None:
    share = conv_share(ev)
    if share < SMALL_SHARE:
        return f"convolutions took {fmt_pct(share)} of a profiled step: nothing for it to speed up"
    return None


def _four_d(model: Any) -> list[Any]:
    return [p for p in model.parameters() if p.dim() == 4]


def _optimizers(s: TuneSession) -> list[Any]:
    """The user's optimizer and the one its name is bound to now (a rebuilt one, stacked)."""
    t = s.target
    found = {id(o): o for o in (t.optimizer, s.user_ns.get(t.optimizer_name or "")) if o}
    return [o for o in found.values() if hasattr(o, "state")]


def _convert_state(optimizers: list[Any], memory_format: Any) -> None:
    """Give the 4-D state of each optimizer (momentum, moments) its parameter's memory format.

    A model converted to channels_last before its optimizer is made gets state in that format
    (``torch.zeros_like`` keeps it); fused kernels require it (params, grads and state of one
    layout), and foreach ones otherwise take their slow path. The repeated runs put the
    state's values back in whatever tensors hold them.
    """
    for opt in optimizers:
        for param, state in opt.state.items():
            if getattr(param, "dim", lambda: 0)() != 4:
                continue
            for key, value in list(state.items()):
                if getattr(value, "shape", None) == param.shape:
                    state[key] = value.contiguous(memory_format=memory_format)


class ChannelsLast(Fix):
    """The model's 4-D weights in ``torch.channels_last`` (see the module doc)."""

    name = "channels_last"
    family = "conv"
    key = "channels_last"
    order = 30
    exact = True

    def explain_skip(self, model: Any, ev: Evidence) -> str | None:
        return self.model_skip(model) or self.profile_skip(ev)

    def model_skip(self, model: Any) -> str | None:
        """Why not, from the model alone (no profile): it has nothing to convert."""
        import torch

        weights = _four_d(model)
        if not weights:
            return "the model has no 4-D (convolution) weights"
        if all(w.is_contiguous(memory_format=torch.channels_last) for w in weights):
            return "the model's convolution weights are channels_last already"
        return None

    def profile_skip(self, ev: Evidence) -> str | None:
        """Why not, from the profile: convolutions took too small a share of the step."""
        return _no_convs(ev)

    @contextlib.contextmanager
    def applied(self, s: TuneSession) -> Iterator[None]:
        import torch  # loaded already: the magic imported it

        model = s.target.model
        optimizers = _optimizers(s)
        model.to(memory_format=torch.channels_last)  # its gradients too (Module._apply)
        _convert_state(optimizers, torch.channels_last)
        try:
            yield
        finally:
            model.to(memory_format=torch.contiguous_format)
            _convert_state(optimizers, torch.contiguous_format)

    def code(self, s: TuneSession) -> list[str]:
        name = s.target.model_name
        return [
            f"{name} = {name}.to(memory_format=torch.channels_last)  # before making its optimizer",
            "# and in the step: x = x.to(memory_format=torch.channels_last)",
        ]

    def apply(self, s: TuneSession) -> str:
        import torch  # loaded already: the magic imported it

        name = s.target.model_name
        s.target.model.to(memory_format=torch.channels_last)
        _convert_state(_optimizers(s), torch.channels_last)
        return (
            f"{name}'s convolution weights (and its optimizer's state for them) are "
            "channels_last; convert the step's input too"
        )


class CudnnBenchmark(Fix):
    """``torch.backends.cudnn.benchmark = True`` (see the module doc)."""

    name = "cudnn.benchmark"
    family = "conv"
    key = "cudnn"
    needs_gpu = True
    order = 31
    warmup = 3
    exact = False  # another algorithm may sum in another order

    def why_not(self, ev: Evidence) -> str | None:
        import torch

        if not ev.cuda:
            return "cuDNN runs CUDA convolutions: cudnn.benchmark needs a GPU"
        if torch.backends.cudnn.benchmark:
            return "torch.backends.cudnn.benchmark is on already"
        return _no_convs(ev)

    @contextlib.contextmanager
    def applied(self, s: TuneSession) -> Iterator[None]:
        import torch  # loaded already: the magic imported it

        cudnn = torch.backends.cudnn
        saved = cudnn.benchmark
        cudnn.benchmark = True
        try:
            yield
        finally:
            cudnn.benchmark = saved

    def code(self, s: TuneSession) -> list[str]:
        return ["torch.backends.cudnn.benchmark = True  # cuDNN times its algorithms per shape"]

    def apply(self, s: TuneSession) -> str:
        import torch  # loaded already: the magic imported it

        torch.backends.cudnn.benchmark = True
        return "torch.backends.cudnn.benchmark = True"
