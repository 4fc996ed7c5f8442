"""Sizing a batch from one trial step's memory, and stepping it down when it does not fit."""

import weakref
from collections.abc import Callable

import pytest
import torch

from jupyter_gpu.tutorials.capstone.fit import (
    BatchFit,
    GraphsRoom,
    fit_batch,
    gradient_bytes,
    settle_batch,
    smaller_batch,
    unusable_bytes_at,
)

GiB = 2**30
# The out-of-memory error of notebook 07's compiled step at batch 42, at the 16gb tier.
OOM_MESSAGE = (
    "CUDA out of memory. Tried to allocate 640.00 MiB. GPU 0 has a total capacity of 139.80 GiB "
    "of which 120.10 GiB is free. Including non-PyTorch memory, this process has 15.03 GiB "
    "memory in use. 14.50 GiB allowed; Of the allocated memory 12.39 GiB is allocated by "
    "PyTorch, and 1.90 GiB is reserved by PyTorch but unallocated."
)


def _fit_from_a_trial_at_4(multiple: int = 1) -> BatchFit:
    """The fit for a 100 GiB budget of a trial step at batch 4 that peaked at 22 GiB.

    The peak: 10 static + 4 gradients + 4 samples of 2 GiB.
    """
    return fit_batch(
        trial_batch=4,
        static_bytes=10 * GiB,
        trial_peak_bytes=22 * GiB,
        fixed_bytes=4 * GiB,
        budget_bytes=100 * GiB,
        multiple=multiple,
    )


def test_fit_from_the_trial() -> None:
    fit = _fit_from_a_trial_at_4()
    assert fit.per_sample_bytes == 2 * GiB
    assert fit.batch == 38  # (100 x 0.9 - 14) / 2
    assert fit.predicted_peak_bytes() <= 90 * GiB
    assert fit.predicted_peak_bytes(4) == 22 * GiB
    assert "batch 38" in fit.describe()
    assert _fit_from_a_trial_at_4(multiple=8).batch == 32


def test_the_copy_the_measurements_keep_comes_out_of_the_budget() -> None:
    # Notebook 07 on the H200: batch 93 fitted one step, then %profile's copy of the weights and
    # optimizer state (4.6 GiB, on the GPU to put them back) ran the next steps out of memory.
    fit = fit_batch(
        trial_batch=4,
        static_bytes=10 * GiB,
        trial_peak_bytes=22 * GiB,
        fixed_bytes=4 * GiB,
        budget_bytes=100 * GiB,
        copy_bytes=10 * GiB,
    )
    assert fit.batch == 33  # (100 x 0.9 - 14 - 10) / 2
    assert fit.predicted_peak_bytes() <= 90 * GiB
    assert fit.predicted_peak_bytes(4) == 32 * GiB  # the step's 22 and the copy beside it
    assert "10.00 GiB for the copy" in fit.describe()


def test_a_budget_too_small_still_gives_one() -> None:
    fit = fit_batch(
        trial_batch=2, static_bytes=GiB, trial_peak_bytes=3 * GiB, fixed_bytes=0, budget_bytes=GiB
    )
    assert fit.batch == 1


def test_refuses_a_trial_that_measured_nothing() -> None:
    with pytest.raises(ValueError, match="measure a real training step"):
        fit_batch(
            trial_batch=2, static_bytes=GiB, trial_peak_bytes=GiB, fixed_bytes=0, budget_bytes=GiB
        )
    with pytest.raises(ValueError, match="margin"):
        fit_batch(
            trial_batch=2,
            static_bytes=0,
            trial_peak_bytes=GiB,
            fixed_bytes=0,
            budget_bytes=GiB,
            margin=1.0,
        )


def test_gradient_bytes() -> None:
    params = [torch.nn.Parameter(torch.zeros(10, 10)), torch.zeros(5, requires_grad=False)]
    assert gradient_bytes(params) == 400


def test_smaller_batch_is_an_eighth_less_and_keeps_the_multiple() -> None:
    assert smaller_batch(42) == 37
    assert smaller_batch(7) == 6  # at least one sample less
    assert smaller_batch(1) == 0  # none smaller
    assert smaller_batch(40, multiple=8) == 32  # 35, rounded down to a multiple of 8
    assert smaller_batch(8, multiple=8) == 0
    with pytest.raises(ValueError, match="positive"):
        smaller_batch(0)


def _fits_up_to(largest: int, tried: list[int]) -> Callable[[int], str]:
    """A try-function whose step runs out of memory above ``largest`` (as CUDA's would)."""

    def try_batch(batch: int) -> str:
        tried.append(batch)
        if batch > largest:
            raise torch.OutOfMemoryError(OOM_MESSAGE)
        return f"ran at {batch}"

    return try_batch


def test_settle_steps_down_until_the_batch_runs() -> None:
    tried: list[int] = []
    said: list[str] = []
    fit = fit_batch(
        trial_batch=8,
        static_bytes=int(1.15 * GiB),
        trial_peak_bytes=int(3.68 * GiB),
        fixed_bytes=int(0.36 * GiB),
        budget_bytes=int(14.5 * GiB),
    )
    assert fit.batch == 42  # notebook 07 at the 16gb tier
    batch, value = settle_batch(fit.batch, _fits_up_to(30, tried), fit=fit, say=said.append)
    assert (batch, value) == (29, "ran at 29")
    assert tried == [42, 37, 33, 29]
    assert len(said) == 3  # one line per batch that did not fit
    assert said[0].startswith("the prediction missed: batch 42 ran out of memory")
    assert "predicted to peak at 12.9 GiB (budget 14.5 GiB)" in said[0]
    assert "held 1.90 GiB it could not use" in said[0]  # from the allocator's message
    assert said[0].endswith("trying batch 37")


def test_settle_keeps_the_fits_multiple() -> None:
    tried: list[int] = []
    fit = _fit_from_a_trial_at_4(multiple=8)
    assert fit.batch == 32
    assert settle_batch(fit.batch, _fits_up_to(20, tried), fit=fit, say=lambda _: None)[0] == 16
    assert tried == [32, 24, 16]


def test_settle_gives_up_with_the_error() -> None:
    tried: list[int] = []
    with pytest.raises(torch.OutOfMemoryError):
        settle_batch(3, _fits_up_to(0, tried), say=lambda _: None)
    assert tried == [3, 2, 1]  # down to batch 1, then the error
    tried.clear()
    with pytest.raises(torch.OutOfMemoryError):
        settle_batch(64, _fits_up_to(0, tried), attempts=2, say=lambda _: None)
    assert tried == [64, 56]
    calls: list[int] = []

    def broken(batch: int) -> None:
        calls.append(batch)
        raise RuntimeError("not a memory error")

    with pytest.raises(RuntimeError, match="not a memory error"):
        settle_batch(8, broken)
    assert calls == [8]  # other errors are not retried
    with pytest.raises(ValueError, match="attempts"):
        settle_batch(8, broken, attempts=0)


def test_a_failed_attempt_is_released_before_the_next() -> None:
    class Activations:
        """Stands for the tensors a failed step's frames hold."""

    held: list[weakref.ref[Activations]] = []
    alive_at_retry: list[bool] = []

    def try_batch(batch: int) -> int:
        # No gc.collect() here: once settle_batch drops the error, reference counting alone
        # frees the failed attempt's frames and what they held.
        alive_at_retry.extend(ref() is not None for ref in held)
        activations = Activations()
        held.append(weakref.ref(activations))
        if batch > 4:
            raise torch.OutOfMemoryError(OOM_MESSAGE)
        return batch

    assert settle_batch(6, try_batch, say=lambda _: None) == (4, 4)  # 6, then 5, then 4
    assert alive_at_retry == [False, False, False]  # neither 6's nor 5's survived to a retry


def test_unusable_bytes_from_the_allocators_message() -> None:
    assert unusable_bytes_at(torch.OutOfMemoryError(OOM_MESSAGE)) == int(1.90 * GiB)
    small = "... and 20.00 MiB is reserved by PyTorch but unallocated. If reserved ..."
    assert unusable_bytes_at(torch.OutOfMemoryError(small)) == 20 * 2**20
    none = "17.88 GiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated."
    assert unusable_bytes_at(torch.OutOfMemoryError(none)) == 0
    if not torch.cuda.is_available():
        assert unusable_bytes_at(torch.OutOfMemoryError("out of memory")) is None


def test_graphs_do_not_fit_beside_a_step_sized_to_the_memory() -> None:
    # Notebook 07 on one H100 80GB, 2026-12-05: the FP8 step at batch 48 peaked at 51.6 GiB with
    # 4.63 GiB of weights and optimizer state and its copy held, in a budget of 78.4 GiB. The
    # capture ran out of memory and its pool stayed reserved: the script's ranks then did too.
    room = GraphsRoom(
        step_peak_bytes=int(51.6 * GiB),
        static_bytes=int(4.63 * GiB),
        copy_bytes=int(4.63 * GiB),
        budget_bytes=int(78.4 * GiB),
    )
    assert room.step_bytes == pytest.approx(42.34 * GiB, rel=1e-3)
    assert room.need_bytes == pytest.approx(93.94 * GiB, rel=1e-3)
    assert not room.fits
    text = room.describe()
    for figure in ("51.6 GiB", "93.9 GiB", "78.4 GiB less 10%"):
        assert figure in text


def test_graphs_fit_where_two_steps_leave_the_margin() -> None:
    def room(peak_gib: float) -> bool:
        return GraphsRoom(
            step_peak_bytes=int(peak_gib * GiB),
            static_bytes=4 * GiB,
            copy_bytes=4 * GiB,
            budget_bytes=100 * GiB,
        ).fits

    # need = 2 peak - 8 GiB against 90 GiB: a peak of 49 GiB fits, 49.5 does not
    assert room(20.0)
    assert room(49.0)
    assert not room(49.5)


@pytest.mark.parametrize(
    ("peak", "static", "copy", "budget", "margin", "says"),
    [
        (10, -1, 0, 100, 0.1, "negative"),
        (5, 4, 4, 100, 0.1, "below the weights"),
        (20, 4, 4, 100, 1.0, "margin"),
    ],
)
def test_graphs_room_refuses_figures_that_are_not_a_step(
    peak: int, static: int, copy: int, budget: int, margin: float, says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        GraphsRoom(
            step_peak_bytes=peak * GiB,
            static_bytes=static * GiB,
            copy_bytes=copy * GiB,
            budget_bytes=budget * GiB,
            margin=margin,
        )
