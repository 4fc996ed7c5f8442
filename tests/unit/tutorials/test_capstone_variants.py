"""The contexts a climb row's "before" runs in: each changes one thing and puts it back."""

import pytest
import torch

from jupyter_gpu.magics.probes.precision import tf32_enabled
from jupyter_gpu.tutorials.capstone.model import CapstoneGPT
from jupyter_gpu.tutorials.capstone.shapes import final_shape_from_spec
from jupyter_gpu.tutorials.capstone.variants import (
    attributes,
    autocast_off,
    rebound,
    tf32_off,
    together,
)


def test_tf32_off_and_autocast_off_put_the_settings_back() -> None:
    before = tf32_enabled()
    with tf32_off():
        assert tf32_enabled() == (False, False)
    assert tf32_enabled() == before
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with autocast_off("cpu"):
            assert not torch.is_autocast_enabled("cpu")
        assert torch.is_autocast_enabled("cpu")


def test_attributes_and_names_are_put_back_even_after_an_error() -> None:
    model = CapstoneGPT(final_shape_from_spec("d128-hd64-l2-t64"), sdpa=True)
    namespace = {"optimizer": "fused"}
    seen = []

    def failing_step() -> None:
        with together(
            attributes(model, checkpointing=True), rebound(namespace, optimizer="adam", new=1)
        ):
            seen.append((model.checkpointing, dict(namespace)))
            raise RuntimeError("a step that fails")

    with pytest.raises(RuntimeError):
        failing_step()
    assert seen == [(True, {"optimizer": "adam", "new": 1})]
    assert not model.checkpointing
    assert namespace == {"optimizer": "fused"}  # a name that was not there is gone again
    typo = attributes(model, checkpionting=True)  # a typo adds nothing
    with pytest.raises(AttributeError):
        typo.__enter__()


def test_the_model_s_own_contexts() -> None:
    model = CapstoneGPT(final_shape_from_spec("d128-hd64-l2-t64"), sdpa=True)
    model.use_attention_backend("math")
    with model.attention_written_out():
        assert not model.sdpa
    assert model.sdpa
    with model.attention_pinned("flash"):
        assert model.attention_backend == "flash"
    assert model.attention_backend == "math"
    x = torch.randint(0, 256, (2, 64))
    with model.attention_pinned("math"):
        written = model(x, x)
    with model.attention_written_out():
        assert torch.allclose(model(x, x), written, atol=1e-5)  # the same computation
    model.compile_blocks(backend="eager")
    compiled = model.compiled_blocks
    with model.blocks_compiled_as(None):
        assert model.compiled_blocks is None
    assert model.compiled_blocks is compiled
    with pytest.raises(ValueError, match="use one of"):
        model.use_attention_backend("fast")
