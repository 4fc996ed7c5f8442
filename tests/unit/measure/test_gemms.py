"""A step's GEMMs from a model's Linear layers: three products per layer, in torch's layouts."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from jupyter_gpu.measure.gemms import (
    GemmShape,
    linear_gemms,
    merge_gemms,
    model_gemms,
    square_gemm,
    step_flops,
)
from jupyter_gpu.tutorials.capstone.model import CapstoneGPT
from jupyter_gpu.tutorials.capstone.shapes import final_shape_from_spec, student_shape
from jupyter_gpu.tutorials.flops import gpt_matmul_params
from jupyter_gpu.tutorials.gpt import GPT, GPTConfig, Style


def test_one_linear_gives_forward_and_both_gradients() -> None:
    forward, grad_input, grad_weight = linear_gemms(16, 48, 96, "bf16", label="fc")
    assert (forward.m, forward.n, forward.k, forward.b_transposed) == (96, 48, 16, True)
    assert (grad_input.m, grad_input.n, grad_input.k) == (96, 16, 48)
    assert not grad_input.a_transposed
    assert not grad_input.b_transposed
    assert (grad_weight.m, grad_weight.n, grad_weight.k) == (48, 16, 96)
    assert grad_weight.a_transposed
    assert forward.label == "fc forward"
    assert step_flops((forward, grad_input, grad_weight)) == 6 * 96 * 16 * 48
    assert linear_gemms(16, 48, 96, "bf16", backward=False) == (
        GemmShape(96, 48, 16, "bf16", b_transposed=True, label="forward"),
    )


def test_the_layouts_are_the_ones_torch_runs() -> None:
    # Y = X W^T; dX = dY W; dW = dY^T X: each product in the shapes and layouts listed.
    x = torch.randn(6, 4, requires_grad=True)
    layer = nn.Linear(4, 5, bias=False)
    y = layer(x)
    dy = torch.randn_like(y)
    y.backward(dy)
    forward, grad_input, grad_weight = linear_gemms(4, 5, 6, "fp32")
    assert torch.allclose(y, x @ layer.weight.t())
    assert tuple(y.shape) == (forward.m, forward.n)
    assert x.grad is not None
    assert layer.weight.grad is not None
    assert torch.allclose(x.grad, dy @ layer.weight)
    assert tuple(x.grad.shape) == (grad_input.m, grad_input.n)
    assert torch.allclose(layer.weight.grad, dy.t() @ x)
    assert tuple(layer.weight.grad.shape) == (grad_weight.m, grad_weight.n)


def test_a_small_model_s_gemms_are_its_linear_layers_merged_by_shape() -> None:
    model = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 32), nn.Linear(32, 32))
    gemms = model_gemms(model, (2, 5), "fp16")
    tokens = 10
    # 3 products for the first layer, 3 shared by the two 32 x 32 layers (count 2)
    assert [g.count for g in gemms] == [1, 1, 1, 2, 2, 2]
    assert gemms[3] == GemmShape(
        tokens, 32, 32, "fp16", 2, b_transposed=True, label="2 forward / 3 forward"
    )
    # the merged list still holds every product: 6 FLOPs per weight per token
    weights = sum(m.weight.numel() for m in model if isinstance(m, nn.Linear))
    assert step_flops(gemms) == 6 * weights * tokens


def test_the_capstone_lists_its_own_gemms_as_its_model_has_them() -> None:
    for final in (
        final_shape_from_spec("d128-hd64-l2-t64"),
        final_shape_from_spec("d256-hd64-l3-t32"),
    ):
        for shape in (final, student_shape(final)):
            model = CapstoneGPT(shape)
            assert model_gemms(model, (3, shape.seq_len), "bf16") == shape.gemms(3, "bf16")
            tokens = 3 * shape.seq_len
            assert step_flops(shape.gemms(3, "bf16")) == 6 * shape.matmul_params() * tokens
    labels = {g.label for g in final_shape_from_spec("d256-hd64-l3-t32").gemms(1, "bf16")}
    assert "blocks.*.mlp.fc grad weight" in labels
    assert "lm_head forward" in labels


@pytest.mark.parametrize("style", ["llama", "gpt2"])
def test_the_tutorial_gpt_s_gemms_do_the_6_n_of_its_model_flops(style: Style) -> None:
    config = GPTConfig(style=style, n_layer=2, d_model=64, n_head=2, context=32)
    gemms = model_gemms(GPT(config), (2, 32), "bf16")
    assert step_flops(gemms) == 6 * gpt_matmul_params(config) * 2 * 32


def test_merge_keeps_layouts_apart_and_sums_counts() -> None:
    a = GemmShape(4, 4, 4, "bf16", label="x")
    b = GemmShape(4, 4, 4, "bf16", b_transposed=True, label="y")
    merged = merge_gemms([a, b, a, GemmShape(4, 4, 4, "bf16", 3, label="z")])
    assert merged == (GemmShape(4, 4, 4, "bf16", 5, label="x / z"), b)


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        GemmShape(0, 4, 4, "bf16")
    with pytest.raises(ValueError, match="dtype"):
        square_gemm(8, "int8")
    with pytest.raises(ValueError, match="batch_shape"):
        model_gemms(nn.Linear(2, 2), (), "fp32")
    assert square_gemm(8192, "bf16").describe() == "8192x8192x8192 bf16 (A.B): square 8192"
