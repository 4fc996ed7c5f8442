"""Sizing a batch from one trial step's memory."""

import pytest

from jupyter_gpu.tutorials.capstone.fit import fit_batch, gradient_bytes

GiB = 2**30


def test_fit_from_the_trial() -> None:
    fit = fit_batch(
        trial_batch=4,
        static_bytes=10 * GiB,
        trial_peak_bytes=22 * GiB,  # 10 static + 4 gradients + 4 samples of 2 GiB
        fixed_bytes=4 * GiB,
        budget_bytes=100 * GiB,
    )
    assert fit.per_sample_bytes == 2 * GiB
    assert fit.batch == 38  # (100 x 0.9 - 14) / 2
    assert fit.predicted_peak_bytes() <= 90 * GiB
    assert fit.predicted_peak_bytes(4) == 22 * GiB
    assert "batch 38" in fit.describe()
    assert (
        fit_batch(
            trial_batch=4,
            static_bytes=10 * GiB,
            trial_peak_bytes=22 * GiB,
            fixed_bytes=4 * GiB,
            budget_bytes=100 * GiB,
            multiple=8,
        ).batch
        == 32
    )


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
    import torch

    params = [torch.nn.Parameter(torch.zeros(10, 10)), torch.zeros(5, requires_grad=False)]
    assert gradient_bytes(params) == 400
