"""Measuring a configuration: 3 runs of steps back to back; the matmul ceiling."""

import time

import pytest

from jupyter_gpu.tutorials.capstone.steps import matmul_ceiling, measure_training, steps_per_run


def test_steps_per_run() -> None:
    assert steps_per_run(0.5, 1.5) == 3
    assert steps_per_run(3.0, 1.5) == 1
    assert steps_per_run(0.001, 1.5, most=20) == 20
    assert steps_per_run(0.0, 1.5) == 20


def test_measure_training_counts_every_step() -> None:
    calls = []

    def step() -> None:
        calls.append(1)
        time.sleep(0.01)

    figures = measure_training(
        step, tokens_per_step=100, flops_per_step=1e9, device="cpu", warmup=2, target_run_s=0.05
    )
    runs, per_run = figures.timing.runs, figures.timing.calls_per_run
    assert runs == 3
    assert len(calls) == 2 + runs * per_run
    assert per_run >= 3  # about 0.05 s of 0.01 s steps
    low, high = figures.tokens_per_s_range
    assert low <= figures.tokens_per_s <= high
    assert figures.tokens_per_s < 100 / 0.01  # a step takes at least its sleep
    assert figures.tflops == pytest.approx(1e9 / figures.timing.median_s / 1e12)
    assert figures.peak_bytes is None  # no CUDA
    assert "over 3 runs" in figures.describe()
    with pytest.raises(ValueError, match="warmup"):
        measure_training(step, tokens_per_step=1, flops_per_step=1, device="cpu", warmup=0)


def test_matmul_ceiling_on_cpu() -> None:
    ceiling = matmul_ceiling("fp32", device="cpu", sizes=(64, 128), calls=2)
    assert ceiling.tflops > 0
    assert ceiling.size in (64, 128)
    assert ceiling.describe().startswith("fp32 matmul")
    with pytest.raises(ValueError, match="dtype"):
        matmul_ceiling("int8", device="cpu")
