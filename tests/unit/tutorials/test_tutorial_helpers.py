"""Smaller tutorial helpers: presets, memory counting, the GPU watch without a GPU, charts."""

import pytest
import torch

from jupyter_gpu.tutorials.gpt import GPT, GPTConfig, estimate_loss
from jupyter_gpu.tutorials.memory import (
    allocator_reading,
    peak_bytes_of,
    saved_tensor_bytes,
    tensor_bytes,
)
from jupyter_gpu.tutorials.plots import bar_chart, format_number
from jupyter_gpu.tutorials.presets import GPT_RUNS, gpt_run
from jupyter_gpu.tutorials.watch import GpuWatch

TINY = GPTConfig(context=16, n_layer=2, n_head=2, d_model=32)


def test_presets_cover_every_mode() -> None:
    assert set(GPT_RUNS) == {"smoke", "cpu", "gpu"}
    assert gpt_run("smoke").tokens_per_step == 8 * 64
    gpu = GPT_RUNS["gpu"].config
    assert gpu.head_dim % 64 == 0  # tensor-core friendly heads
    assert gpu.d_model % 128 == 0


def test_saved_activations_grow_with_the_batch_and_shrink_with_checkpointing() -> None:
    torch.manual_seed(0)
    model = GPT(TINY)
    idx = torch.randint(0, 256, (8, 16))
    small = saved_tensor_bytes(lambda: model(idx[:2], idx[:2]))
    large = saved_tensor_bytes(lambda: model(idx, idx))
    assert large > 2 * small
    model.checkpointing = True
    assert saved_tensor_bytes(lambda: model(idx, idx)) < large / 2
    assert tensor_bytes(model.parameters()) == 4 * model.n_params()


def test_estimate_loss_is_repeatable_and_leaves_training_mode() -> None:
    torch.manual_seed(0)
    model = GPT(TINY)
    tokens = torch.randint(0, 256, (500,), dtype=torch.uint8)
    a = estimate_loss(model, tokens, batch=4, batches=2, seed=3)
    b = estimate_loss(model, tokens, batch=4, batches=2, seed=3)
    assert a == b
    assert model.training


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA answers")
def test_allocator_helpers_without_cuda() -> None:
    assert allocator_reading("x") is None
    assert peak_bytes_of(lambda: None) is None


def test_gpu_watch_records_windows() -> None:
    with GpuWatch(interval_s=0.1) as watch, watch.window("idle"):
        pass
    stats = watch.stats("idle")
    if watch.reason is not None:  # no NVML here (CI): no readings, and a reason
        assert stats.samples == 0
        assert stats.util_pct_mean is None
    assert stats.duration_s > 0
    with pytest.raises(KeyError):
        watch.stats("never recorded")


def test_numbers_and_labels_in_charts() -> None:
    assert format_number(1571.2) == "1,571"
    assert format_number(58.24) == "58.2"
    assert format_number(0.01234) == "0.0123"
    # An interval's ends keep their zeros (4.80-4.85, not 4.8-4.85), and 999.6 rounds to 1,000
    assert [format_number(v) for v in (4.8, 4.85, 999.6)] == ["4.80", "4.85", "1,000"]
    chart = bar_chart({"data already on the device and more words": 3.0}, title="t", unit="x")
    svg = chart._repr_mimebundle_()["text/html"]
    assert svg.count("<tspan") == 2  # a long label wraps onto two lines
