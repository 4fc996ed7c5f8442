"""Reading a profile: kernel families by name, syncs per step, the rate of each family."""

from types import SimpleNamespace

import pytest

from jupyter_gpu.magics.profile.rows import OpRow
from jupyter_gpu.measure.gemms import square_gemm
from jupyter_gpu.measure.matmul_rate import MatmulRate
from jupyter_gpu.measure.peaks import peak_for
from jupyter_gpu.tutorials.capstone.profiles import (
    OTHER,
    WRITTEN_OUT,
    attention_backend_of,
    attention_kernels,
    breakdown_text,
    efficiency_lines,
    gpu_time_by_kind,
    kernel_kind,
    largest_cost,
    syncs_per_step,
    where_time_goes,
)
from jupyter_gpu.tutorials.capstone.shapes import final_shape_from_spec


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNT", "matrix products"),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64", "matrix products"),
        ("triton_tem_fused_mm_0", "matrix products"),
        ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128>>", "attention"),
        ("fmha_cutlassF_bf16_aligned_64x128_rf_sm80", "attention"),
        (
            "void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor>",
            "optimizer",
        ),
        ("triton_poi_fused_add_mul_silu_3", "fused by inductor (Triton)"),
        ("Memcpy HtoD (Pinned -> Device)", "copies"),
        ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>", WRITTEN_OUT),
        ("void at::native::vectorized_elementwise_kernel<4, masked_fill_kernel>", WRITTEN_OUT),
        ("void at::native::vectorized_elementwise_kernel<4, AddFunctor<float>>", OTHER),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7", "attention"),
    ],
)
def test_kernel_kind(name: str, kind: str) -> None:
    assert kernel_kind(name) == kind


def gpu_row(name: str, seconds: float) -> OpRow:
    return OpRow(name, 1, 0.0, 0.0, seconds, seconds, 0, 0, on_gpu=True)


def test_breakdown_and_rates() -> None:
    shape = final_shape_from_spec("d1024-hd128-l2-t1024")
    batch, steps = 4, 2
    tokens = batch * shape.seq_len * steps
    matmul_s = 6 * shape.matmul_params() * tokens / 500e12  # ran at 500 TFLOP/s
    rows = [
        gpu_row("nvjet_gemm", matmul_s),
        gpu_row("flash_fwd_kernel", 0.001),
        gpu_row("triton_poi_fused_0", 0.002),
        OpRow("aten::mm", 10, 0.1, 0.1, 0.0, matmul_s, 0, 0),  # a CPU op: counts its kernels
    ]
    profile = SimpleNamespace(
        rows=rows,
        wall_s=matmul_s + 0.005,
        gpu_idle_fraction=0.1,
        idle_s={"host": 0.0005, "kernels": 0.0},
        sync_count=4,
    )
    assert set(gpu_time_by_kind(rows)) == {
        "matrix products",
        "attention",
        "fused by inductor (Triton)",
    }
    assert attention_kernels(rows) == ["flash_fwd_kernel"]
    assert syncs_per_step(profile, steps) == 2.0
    assert "idle 10% (host" in breakdown_text(profile)
    measured = MatmulRate(
        800.0, 790.0, 810.0, 0.95, 8, 2.0, "CUDA events", "NVIDIA H200",
        (square_gemm(8192, "bf16"),), (800.0,),
    )  # fmt: skip
    lines = efficiency_lines(profile, shape, batch, steps, measured)
    assert lines[0].startswith(
        "matrix products of the weights: 500 TFLOP/s (62% of the matmul rate measured here on "
        "this model's GEMMs, 800 TFLOP/s)"
    )
    # The attention kernel's rate divides the work it did: per sequence, head and layer the
    # T (T + 1) / 2 query-key pairs the causal mask keeps, 4 head_dim FLOPs each forward, 2.5
    # times that backward; not the model FLOPs' 12 L d T per token (which would read 1.7x more).
    pairs = shape.seq_len * (shape.seq_len + 1) // 2
    work = shape.n_layer * batch * steps * shape.n_head * 3.5 * 4 * shape.head_dim * pairs
    assert f"attention kernels: {work / 0.001 / 1e12:.0f} TFLOP/s of the work they did" in lines[1]
    model_count = 12 * shape.n_layer * shape.d_model * shape.seq_len * tokens
    assert f"{model_count / 0.001 / 1e12:.0f} TFLOP/s" not in lines[1]
    assert "at the matmul rate measured here" in lines[-1]
    # FP8 products against the bf16 rate would read "more than the GPU can do": they are set
    # beside the data-sheet FP8 peak, and the step at a rate nobody measured is not worked out
    in_fp8 = efficiency_lines(
        profile, shape, batch, steps, measured, fp8_peak=peak_for("NVIDIA H200", "fp8")
    )
    assert in_fp8[0].startswith(
        "matrix products of the weights: 500 TFLOP/s (in FP8: 25% of the data-sheet dense FP8 "
        "peak, 1979 TFLOP/s)"
    )
    assert "matmul rate measured here on" not in in_fp8[0]
    assert not any("would take" in line for line in in_fp8)
    assert in_fp8[-1].startswith("no FP8 matmul rate was measured here (the matmul rate measured ")
    assert "is bf16's" in in_fp8[-1]
    without = efficiency_lines(profile, shape, batch, steps, None)
    assert without[0].endswith("% of the profiled time")
    assert "measured" not in without[0]
    assert not any("would take" in line for line in without)
    empty = SimpleNamespace(rows=[], wall_s=1.0, gpu_idle_fraction=None, idle_s={})
    assert efficiency_lines(empty, shape, batch, steps, None) == [
        "no GPU kernels in this profile: nothing to split"
    ]
    assert breakdown_text(empty).startswith("no GPU kernels")


def test_the_largest_cost_besides_the_matrix_products_names_the_next_fix() -> None:
    rows = [
        gpu_row("nvjet_gemm", 0.060),
        gpu_row("cunn_SoftMaxForward", 0.015),
        gpu_row("masked_fill_kernel", 0.005),
        gpu_row("multi_tensor_apply_kernel<AdamFunctor>", 0.004),
    ]
    profile = SimpleNamespace(
        rows=rows,
        wall_s=1.0,  # the whole cell: not what the shares are of
        window_s=0.1,  # two steps' whole periods
        steps=2,
        gpu_idle_fraction=0.16,
        idle_s={"host": 0.012, "kernels": 0.004},
        loader_s=0.002,
    )
    # the written-out attention's softmax and mask: 20 ms of the 100 ms window
    assert largest_cost(profile) == (WRITTEN_OUT, pytest.approx(0.2))
    text = where_time_goes(profile)
    assert "of 2 steps (100 ms)" in text
    assert "matrix products 60%" in text
    assert text.endswith(f"Largest besides the weights' matrix products: {WRITTEN_OUT}, 20%")
    # once the attention is fused, the host's gaps lead
    profile.rows = [gpu_row("nvjet_gemm", 0.060), gpu_row("flash_fwd_kernel", 0.005)]
    assert largest_cost(profile) == ("GPU idle, waiting on the host", pytest.approx(0.12))
    profile.loader_s = 0.03  # a DataLoader that takes 30 ms of the CPU's steps
    assert largest_cost(profile)[0].startswith("the DataLoader")
    cpu = SimpleNamespace(rows=[], wall_s=1.0, window_s=0.5, steps=2, idle_s={}, loader_s=0.1)
    assert largest_cost(cpu) is None  # no GPU kernels: nothing to rank


def test_attention_backend_of_kernel_names() -> None:
    assert attention_backend_of(["cudnn_generated_fort_native_sdpa_sm90_flash_fprop"]) == "cudnn"
    assert attention_backend_of(["void pytorch_flash::flash_fwd_kernel<...>"]) == "flash"
    assert attention_backend_of(["fmha_cutlassF_bf16_aligned_64x128_rf_sm80"]) == "efficient"
    assert attention_backend_of([]) is None
