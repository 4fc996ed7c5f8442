"""On a real NVIDIA GPU: the matmul rate measured here, and MFU's data-sheet peak for this GPU.

    python3 -m pytest -m gpu tests/gpu/test_matmul_rate_gpu.py -q -s    # about 15 s on an H200

Writes ``$JUPYTER_GPU_OUT/matmul_rate_gpu.json`` (each rate's sentence) when that is set. Checks:

- this GPU's name finds its data-sheet peak (the H200 the project runs on is in the table), and
  a sustained bf16 rate, on square products and on the capstone's own GEMMs, stays below it: a
  data-center board does not beat its data sheet for two seconds;
- the rate is timed with CUDA events, for at least a second, and reads the SM clock.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.gpu


def test_sustained_rates_stay_below_the_data_sheet_peak(figures: dict[str, Any]) -> None:
    import torch

    from jupyter_gpu.measure.gemms import square_gemm
    from jupyter_gpu.measure.matmul_rate import measure_matmul_rate
    from jupyter_gpu.measure.peaks import peak_for
    from jupyter_gpu.tutorials.capstone.shapes import final_shape_from_spec

    name = torch.cuda.get_device_name()
    peak = peak_for(name, "bf16")
    figures["device"] = name
    figures["peak"] = peak.describe()
    square = measure_matmul_rate([square_gemm(8192, "bf16")], device="cuda", seconds=2.0)
    shape = final_shape_from_spec("d2048-hd128-l8-t2048")
    model = measure_matmul_rate(shape.gemms(16, "bf16"), device="cuda", seconds=2.0)
    figures["square"] = square.describe()
    figures["capstone_gemms"] = model.describe()
    for rate in (square, model):
        assert rate.clock == "CUDA events"
        assert rate.sustained
        assert rate.timed_s >= 1.0
        assert rate.machine.sm_clock_mhz is not None  # NVML read the clock while it ran
        assert rate.tflops > 0
    if "GeForce" in name:
        pytest.skip(f"{name}: a GeForce card's clock can run above its rated boost")
    assert peak.dense_tflops is not None, peak.why_none
    assert square.tflops < peak.dense_tflops
    assert model.tflops < peak.dense_tflops
