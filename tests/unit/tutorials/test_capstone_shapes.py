"""Capstone shapes: the student's round numbers, the aligned final shape, the override, FLOPs."""

import pytest
import torch

from jupyter_gpu.tutorials.capstone.model import CapstoneGPT
from jupyter_gpu.tutorials.capstone.shapes import (
    SHAPE_ENV,
    ModelShape,
    capstone_sizes,
    final_shape,
    final_shape_from_spec,
    student_shape,
)
from jupyter_gpu.tutorials.flops import gpt_train_flops_per_token
from jupyter_gpu.tutorials.gpt import GPT, GPTConfig


def test_final_shape_is_aligned_and_the_student_is_not() -> None:
    final = final_shape_from_spec("d2048-hd128-l8-t2048")
    assert (final.d_model, final.n_head, final.head_dim) == (2048, 16, 128)
    assert final.mlp_hidden == 5504  # 8/3 x 2048 = 5461.3, rounded up to a multiple of 128
    assert final.vocab_size == 384  # 259 padded to a multiple of 128
    assert final.misaligned() == []
    student = student_shape(final)
    assert (student.d_model, student.n_head, student.head_dim) == (2000, 20, 100)
    assert student.mlp_hidden == 5333
    assert student.vocab_size == 259
    assert (student.n_layer, student.seq_len) == (final.n_layer, final.seq_len)
    assert student.misaligned() == [
        "vocabulary 259",
        "d_model 2000",
        "head_dim 100",
        "mlp_hidden 5333",
    ]


@pytest.mark.parametrize(
    ("spec", "width", "head"),
    [
        ("d128-hd64-l2-t64", 100, 50),
        ("d1024-hd128-l8-t1024", 1000, 100),
        ("d1536-hd128-l8-t2048", 1500, 100),
    ],
)
def test_student_widths(spec: str, width: int, head: int) -> None:
    student = student_shape(final_shape_from_spec(spec))
    assert student.d_model == width
    assert student.head_dim == head


def test_spec_round_trip_and_errors() -> None:
    shape = final_shape(1536, 128, 12, 1024)
    assert final_shape_from_spec(shape.spec()) == shape
    with pytest.raises(ValueError, match="d<width>"):
        final_shape_from_spec("2048x128")
    with pytest.raises(ValueError, match="divide"):
        final_shape(2000, 128, 8, 1024)
    with pytest.raises(ValueError, match="even head width"):
        ModelShape(259, 300, 4, 800, 2, 64)  # heads of 75: RoPE needs an even width
    with pytest.raises(ValueError, match="n_layer"):
        ModelShape(259, 256, 4, 700, 0, 64)


def test_sizes_by_mode_tier_and_env() -> None:
    assert capstone_sizes("smoke", environ={}).final.spec() == "d128-hd64-l2-t64"
    gpu = capstone_sizes("gpu", "80gb", environ={})
    assert gpu.final.spec() == "d2048-hd128-l8-t2048"
    assert not gpu.autotune  # minutes of compile that did not pay: asked for, not by default
    assert capstone_sizes("gpu", "80gb", environ={"JUPYTER_GPU_CAPSTONE_AUTOTUNE": "1"}).autotune
    assert not gpu.from_env
    assert gpu.requested_batch == 32
    assert capstone_sizes("gpu", "16gb", environ={}).final.d_model == 1024
    env = {SHAPE_ENV: "d3072-hd128-l6-t2048", "JUPYTER_GPU_CAPSTONE_AUTOTUNE": "0"}
    chosen = capstone_sizes("gpu", "80gb", environ=env)
    assert chosen.final.spec() == "d3072-hd128-l6-t2048"
    assert chosen.from_env
    assert chosen.student.d_model == 3000
    assert not chosen.autotune
    assert not capstone_sizes("cpu", environ={}).autotune  # max-autotune is for a GPU
    with pytest.raises(ValueError, match="no capstone sizes"):
        capstone_sizes("gpu", "8gb", environ={})
    with pytest.raises(ValueError, match=SHAPE_ENV):
        capstone_sizes("gpu", "80gb", environ={SHAPE_ENV: "big"})


def test_flops_follow_the_tutorial_convention() -> None:
    config = GPTConfig(vocab_size=256, context=128, n_layer=3, n_head=4, d_model=256)
    shape = ModelShape(256, 256, 4, config.mlp_hidden, 3, 128)
    assert shape.train_flops_per_token() == gpt_train_flops_per_token(config)
    assert shape.matmul_params() == sum(
        m.weight.numel() for m in GPT(config).modules() if isinstance(m, torch.nn.Linear)
    )


def test_matmul_params_count_the_models_linear_weights() -> None:
    shape = student_shape(final_shape_from_spec("d128-hd64-l2-t64"))
    model = CapstoneGPT(shape)
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert shape.matmul_params() == linear  # the tied output layer counted once
