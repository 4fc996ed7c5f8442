"""FP8 training of the capstone's blocks with torchao's float8, switched on and off for timing.

Hopper (and Ada) tensor cores multiply FP8 matrices at twice their bf16 rate (the H200's data
sheet: 1,979 against 989.5 TFLOP/s dense). torchao's float8 training
(``torchao.float8.convert_to_float8_training``, written against torchao 0.18.0) swaps each
``nn.Linear`` for a ``Float8Linear``: its forward casts the input and the weight to
``float8_e4m3fn`` with a scale per tensor (the *tensorwise* recipe: the scale is the tensor's
largest magnitude over e4m3's largest value, found anew every step), multiplies them with
``torch._scaled_mm``, and its backward does the same for the gradient products; the weights,
their gradients and the optimizer stay in fp32. ``Float8Linear.from_float`` keeps the
``nn.Linear``'s own weight ``Parameter``.

That is what makes :class:`Float8Swap` possible: it converts a copy of each block's module list
structure, keeping each ``Float8Linear`` beside the ``nn.Linear`` it came from, both holding the
same weight. ``use(True)`` puts the FP8 modules in the blocks, ``use(False)`` the bf16 ones, and
:meth:`Float8Swap.off` is a context with the bf16 ones, so the climb can time FP8 against bf16
in interleaved rounds on one model, one optimizer, no copy of the weights. Only the blocks'
products are converted: the output layer is tied to the embedding, and its 384-wide vocabulary
is small.

:func:`float8_unavailable` says why FP8 cannot run here (no torchao, no CUDA, a GPU before
compute capability 8.9, a tier that stands for a GPU without bf16), or ``""``.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

#: The recipe the capstone uses; ``rowwise`` is torchao's other (slower here: issue 32).
RECIPE = "tensorwise"
#: The torchao release this module was written against (its float8 API: config, conversion).
TORCHAO_WRITTEN_AGAINST = "0.18.0"
#: FP8 tensor cores: Ada (8.9) and Hopper (9.0) on.
MIN_CAPABILITY = (8, 9)


def torchao_version() -> str | None:
    """The installed torchao's version, or ``None`` when it is not installed (nothing imported)."""
    if importlib.util.find_spec("torchao") is None:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torchao")
    except PackageNotFoundError:
        return "unknown"


def float8_unavailable(device: str, *, bf16: bool = True) -> str:
    """Why FP8 training cannot run here, in a sentence; ``""`` when it can.

    Args:
        device: where the notebook trains.
        bf16: whether the run trains in bf16 (a tier that emulates a GPU without bf16, a T4,
            stands for a GPU without FP8 either).
    """
    if torch.device(device).type != "cuda" or not torch.cuda.is_available():
        return "FP8 matrix products need an NVIDIA GPU with FP8 tensor cores; this run has none"
    capability = torch.cuda.get_device_capability()
    if capability < MIN_CAPABILITY:
        return (
            f"this GPU is compute capability {capability[0]}.{capability[1]}: FP8 tensor cores "
            "start with 8.9 (Ada) and 9.0 (Hopper)"
        )
    if not bf16:
        return (
            "this run takes the path of a GPU without bf16 (the 16gb tier stands for a T4), "
            "which has no FP8 tensor cores either"
        )
    if torchao_version() is None:
        return (
            f"torchao is not installed (pip install torchao=={TORCHAO_WRITTEN_AGAINST}, a wheel "
            "for the GPU machine): its float8 training is what this section measures"
        )
    return ""


def _divisible(linear: nn.Linear, by: int = 16) -> bool:
    """``torch._scaled_mm`` needs both dimensions of the weight divisible by 16."""
    return linear.in_features % by == 0 and linear.out_features % by == 0


@dataclass
class _Pair:
    parent: nn.Module
    name: str
    high: nn.Module  # the nn.Linear
    fp8: nn.Module  # its Float8Linear, the same weight


class Float8Swap:
    """FP8 twins of the blocks' ``nn.Linear`` modules, switched in and out (module doc).

    Raises:
        ImportError: torchao is not installed.
        ValueError: the blocks hold no ``nn.Linear`` whose dimensions divide by 16.
    """

    def __init__(self, blocks: nn.Module, *, recipe: str = RECIPE) -> None:
        # torchao is optional (a wheel on the GPU machine): no stubs where it is not installed
        from torchao.float8 import Float8LinearConfig  # type: ignore[import-not-found,unused-ignore]
        from torchao.float8.float8_linear import (  # type: ignore[import-not-found,unused-ignore]
            Float8Linear,
        )

        config = Float8LinearConfig.from_recipe_name(recipe)
        self.recipe = recipe
        self.pairs: list[_Pair] = []
        for parent in blocks.modules():
            for name, child in list(parent.named_children()):
                if type(child) is nn.Linear and _divisible(child):
                    twin = Float8Linear.from_float(child, config=config)
                    self.pairs.append(_Pair(parent, name, child, twin))
        if not self.pairs:
            raise ValueError("no nn.Linear with dimensions divisible by 16 to train in FP8")
        self.enabled = False

    @property
    def converted(self) -> int:
        """How many ``nn.Linear`` modules have an FP8 twin."""
        return len(self.pairs)

    def use(self, enabled: bool) -> None:
        """Put the FP8 modules (``True``) or the bf16 ones (``False``) in the blocks."""
        for pair in self.pairs:
            setattr(pair.parent, pair.name, pair.fp8 if enabled else pair.high)
        self.enabled = enabled

    @contextlib.contextmanager
    def off(self) -> Iterator[None]:
        """The bf16 modules inside, whatever was in use before (put back after)."""
        was = self.enabled
        self.use(False)
        try:
            yield
        finally:
            self.use(was)

    def describe(self) -> str:
        """E.g. ``32 nn.Linear of the blocks in FP8 (torchao 0.18.0, tensorwise scaling)``."""
        return (
            f"{self.converted} nn.Linear of the blocks in FP8 (torchao {torchao_version()}, "
            f"{self.recipe} scaling; the output layer stays in bf16)"
        )


@dataclass(frozen=True)
class LossAgreement:
    """Two loss curves from the same weights on the same batches, and whether they agree.

    Attributes:
        reference: the losses of the reference run (bf16), one per step.
        candidate: the candidate's (FP8), on the same batches from the same state.
        last: how many final steps the means are taken over.
        tolerance: the largest relative difference of those means that counts as agreeing.
    """

    reference: tuple[float, ...]
    candidate: tuple[float, ...]
    last: int
    tolerance: float

    @property
    def reference_mean(self) -> float:
        return sum(self.reference[-self.last :]) / self.last

    @property
    def candidate_mean(self) -> float:
        return sum(self.candidate[-self.last :]) / self.last

    @property
    def relative_difference(self) -> float:
        """|candidate - reference| / reference, over the means of the last steps."""
        return abs(self.candidate_mean - self.reference_mean) / abs(self.reference_mean)

    @property
    def largest_step_difference(self) -> float:
        """The largest |candidate - reference| of one step (nats)."""
        return max(abs(a - b) for a, b in zip(self.candidate, self.reference, strict=True))

    @property
    def agrees(self) -> bool:
        return self.relative_difference <= self.tolerance

    def describe(self) -> str:
        return (
            f"{len(self.reference)} steps from the same weights on the same batches: mean loss of "
            f"the last {self.last} {self.candidate_mean:.4f} against {self.reference_mean:.4f} "
            f"({self.relative_difference:.2%} apart, tolerance {self.tolerance:.0%}); largest "
            f"difference at one step {self.largest_step_difference:.4f} nats"
        )


def agreement(
    reference: list[float], candidate: list[float], *, last: int, tolerance: float
) -> LossAgreement:
    """Compare two loss curves of equal length over their last ``last`` steps.

    Raises:
        ValueError: the curves differ in length, are empty, or ``last`` is out of range.
    """
    if len(reference) != len(candidate) or not reference:
        raise ValueError(f"need two curves of one length, got {len(reference)}, {len(candidate)}")
    if not 1 <= last <= len(reference):
        raise ValueError(f"last must be between 1 and {len(reference)}, not {last}")
    return LossAgreement(tuple(reference), tuple(candidate), last, tolerance)


class TrainingState:
    """A copy of a model's and an optimizer's state (and a scaler's), put back on demand.

    The copy is kept on the host (pinned when CUDA is in use): the GPU's memory is the
    training's. ``restore`` copies the values back in place, so the optimizer keeps pointing at
    the same tensors.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, scaler: Any) -> None:
        self.model, self.optimizer, self.scaler = model, optimizer, scaler
        pin = torch.cuda.is_available() and torch.cuda.is_initialized()  # type: ignore[no-untyped-call]  # torch leaves it untyped
        self.params = [self._host(p.detach(), pin) for p in model.parameters()]
        self.state = [
            {k: self._host(v, pin) if torch.is_tensor(v) else v for k, v in s.items()}
            for s in (optimizer.state[p] for p in model.parameters())
        ]
        self.scaler_state = scaler.state_dict() if scaler is not None else None

    @staticmethod
    def _host(tensor: torch.Tensor, pin: bool) -> torch.Tensor:
        copy = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu", pin_memory=pin)
        copy.copy_(tensor)
        return copy

    @torch.no_grad()
    def restore(self) -> None:
        """Put the saved values back into the live tensors (in place)."""
        for live, saved in zip(self.model.parameters(), self.params, strict=True):
            live.copy_(saved, non_blocking=True)
        for p, saved_state in zip(self.model.parameters(), self.state, strict=True):
            live_state = self.optimizer.state[p]
            for key, value in saved_state.items():
                if torch.is_tensor(value) and torch.is_tensor(live_state.get(key)):
                    live_state[key].copy_(value, non_blocking=True)
                else:
                    live_state[key] = value
        if self.scaler_state is not None and self.scaler is not None:
            self.scaler.load_state_dict(self.scaler_state)
        self.optimizer.zero_grad(set_to_none=True)
