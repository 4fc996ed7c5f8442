"""Measuring a configuration: 3 runs of steps back to back; the matmul rates measured here."""

import time

import pytest

from jupyter_gpu.magics.probes.precision import tf32_enabled
from jupyter_gpu.tutorials.capstone.shapes import final_shape_from_spec
from jupyter_gpu.tutorials.capstone.steps import (
    format_matmul_rate,
    measure_training,
    model_matmul_rate,
    steps_per_run,
)


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


def test_format_matmul_rate_times_a_square_product_and_puts_tf32_back() -> None:
    before = tf32_enabled()
    rate = format_matmul_rate("tf32", device="cpu", size=64, seconds=0.05)
    assert tf32_enabled() == before
    assert rate.tflops > 0
    assert rate.gemms[0].describe().startswith("64x64x64 tf32")
    assert rate.describe().startswith("the matmul rate measured here: ")
    # 0.05 s asked: a burst, unless a loaded machine stretched the rounds past a second
    assert ("a burst of" in rate.describe()) == (rate.timed_s < 1.0)
    with pytest.raises(ValueError, match="dtype"):
        format_matmul_rate("int8", device="cpu")


def test_model_matmul_rate_times_the_shape_s_own_gemms() -> None:
    shape = final_shape_from_spec("d128-hd64-l2-t64")
    rate = model_matmul_rate(shape, 2, "fp32", device="cpu", seconds=0.05)
    assert rate.gemms == shape.gemms(2, "fp32")
    assert len(rate.gemm_tflops) == len(rate.gemms)
    assert rate.tflops > 0
