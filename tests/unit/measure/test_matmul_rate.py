"""The matmul rate measured here, run on the CPU with tiny shapes: it runs, and says what it is."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from jupyter_gpu.measure.compare import Comparison
from jupyter_gpu.measure.gemms import GemmShape, linear_gemms, square_gemm
from jupyter_gpu.measure.matmul_rate import NAME, measure_matmul_rate
from jupyter_gpu.measure.timing import Timing


def test_the_rate_of_a_step_s_gemms_on_the_cpu_is_measured_and_named() -> None:
    gemms = (*linear_gemms(32, 64, 48, "fp32", count=2, label="fc"), square_gemm(24, "fp32"))
    rate = measure_matmul_rate(gemms, device="cpu", seconds=0.05, watch=False)
    assert rate.clock == "perf_counter"
    assert rate.device_name == "CPU"
    assert rate.rounds >= 8
    assert rate.tflops > 0
    assert rate.low_tflops <= rate.tflops <= rate.high_tflops
    assert len(rate.gemm_tflops) == len(gemms)
    assert all(r > 0 for r in rate.gemm_tflops)
    # (how the mix's rate is made from the products' times: the test below, on known times;
    # here, on a busy machine, one product's median and the median round can be far apart)
    assert rate.timed_s > 0
    text = rate.describe()
    assert text.startswith(f"{NAME}: ")
    # 0.05 s asked: a burst, unless a loaded machine made the 8 rounds last a second
    assert ("a burst of" in text) == (not rate.sustained) == (rate.timed_s < 1.0)
    assert "4 GEMM shapes (7 products a step)" in text
    assert rate.percent_of(rate.tflops / 2) == pytest.approx(0.5)


def test_the_mix_is_the_steps_flops_over_the_steps_time_round_by_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gemms = (GemmShape(64, 64, 64, "fp32", count=3), GemmShape(32, 32, 32, "fp32"))
    # per-call times of each product, round by round: round 1 is slow for the first product
    times = {"0": (1e-3, 4e-3, 1e-3), "1": (2e-4, 2e-4, 3e-4)}

    def known_times(variants: dict[str, object], **_: object) -> Comparison:
        assert list(variants) == ["0", "1"]
        return Comparison(
            {name: Timing(t, warmup=0) for name, t in times.items()}, "0", 3, "perf_counter"
        )

    monkeypatch.setattr("jupyter_gpu.measure.matmul_rate.compare", known_times)
    rate = measure_matmul_rate(gemms, device="cpu", seconds=0.01, watch=False)
    flops = 3 * 2 * 64**3 + 2 * 32**3
    step_times = [3 * a + b for a, b in zip(times["0"], times["1"], strict=True)]
    per_round = sorted(flops / t / 1e12 for t in step_times)
    assert rate.tflops == pytest.approx(per_round[1])  # the median round's
    assert rate.rounds == 3
    # each round's rate is a weighted harmonic mean of its products' rates, so it lies
    # between them; each product's figure is its median call's
    assert rate.gemm_tflops == pytest.approx((2 * 64**3 / 1e-3 / 1e12, 2 * 32**3 / 2e-4 / 1e12))
    assert min(rate.gemm_tflops) <= rate.tflops <= max(rate.gemm_tflops)
    assert rate.timed_s == pytest.approx(sum(times["0"]) + sum(times["1"]))


def test_only_a_second_or_more_is_called_sustained() -> None:
    rate = measure_matmul_rate([square_gemm(8, "fp32")], device="cpu", seconds=0.01, watch=False)
    burst = replace(rate, timed_s=0.014)
    assert not burst.sustained
    assert "a burst of 14.0 ms, under the 1 s a sustained rate needs" in burst.describe()
    sustained = replace(rate, timed_s=2.0)
    assert sustained.sustained
    assert "sustained over 2.00 s (perf_counter)" in sustained.describe()


def test_an_interval_s_ends_keep_their_zeros_and_read_alike() -> None:
    rate = measure_matmul_rate([square_gemm(8, "fp32")], device="cpu", seconds=0.01, watch=False)
    on_a_gpu = replace(rate, tflops=683.4, low_tflops=680.0, high_tflops=688.52)
    assert on_a_gpu.interval_text() == "680.0-688.5"  # not .4g's "680-688.5"
    assert "683.4 TFLOP/s (680.0-688.5, " in on_a_gpu.describe()
    on_a_cpu = replace(rate, tflops=0.0206, low_tflops=0.02, high_tflops=0.0213)
    assert on_a_cpu.interval_text() == "0.0200-0.0213"


def test_the_products_are_computed_in_the_layouts_listed() -> None:
    # A wrong view would raise in torch.mm (sizes) or time a different product.
    gemms = (
        GemmShape(8, 12, 4, "bf16", a_transposed=True),
        GemmShape(8, 12, 4, "bf16", b_transposed=True),
        GemmShape(16, 4, 8, "bf16"),
    )
    rate = measure_matmul_rate(gemms, device="cpu", seconds=0.02, watch=False)
    assert rate.dtypes == ("bf16",)


def test_autocast_is_off_inside() -> None:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        rate = measure_matmul_rate([square_gemm(16, "fp32")], device="cpu", seconds=0.02)
    assert rate.tflops > 0


def test_nothing_to_time_is_refused() -> None:
    with pytest.raises(ValueError, match="no GEMMs"):
        measure_matmul_rate([], device="cpu")
    with pytest.raises(ValueError, match="seconds"):
        measure_matmul_rate([square_gemm(8, "fp32")], device="cpu", seconds=0)
