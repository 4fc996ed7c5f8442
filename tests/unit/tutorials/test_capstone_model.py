"""The capstone GPT: attention by hand equals SDPA; regional compilation compiles one block."""

import math

import pytest
import torch

from jupyter_gpu.tutorials.capstone.model import CapstoneGPT
from jupyter_gpu.tutorials.capstone.shapes import final_shape_from_spec, student_shape

SHAPE = student_shape(final_shape_from_spec("d128-hd64-l2-t64"))  # d 100, heads of 50


def test_hand_written_attention_equals_sdpa() -> None:
    torch.manual_seed(0)
    model = CapstoneGPT(SHAPE)
    assert not model.sdpa
    idx = torch.randint(0, SHAPE.vocab_size, (2, SHAPE.seq_len))
    by_hand = model(idx)
    model.use_sdpa()
    assert model.sdpa
    torch.testing.assert_close(model(idx), by_hand, rtol=1e-4, atol=1e-5)
    loss = model(idx, torch.randint(0, SHAPE.vocab_size, idx.shape))
    assert abs(loss.item() - math.log(SHAPE.vocab_size)) < 0.5  # untrained: near uniform
    with pytest.raises(ValueError, match="longer than seq_len"):
        model(torch.zeros(1, SHAPE.seq_len + 1, dtype=torch.long))


@pytest.mark.slow
def test_regional_compilation_reuses_one_graph_and_checkpointing_keeps_gradients() -> None:
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model = CapstoneGPT(SHAPE, sdpa=True)
    idx = torch.randint(0, SHAPE.vocab_size, (2, SHAPE.seq_len))
    model(idx, idx).backward()
    eager = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    torch._dynamo.reset()
    counters.clear()
    model.compile_blocks(backend="aot_eager")
    assert model.blocks_compiled
    model.checkpointing = True
    model(idx, idx).backward()
    assert counters["stats"]["unique_graphs"] == 1  # both blocks run the one compiled graph
    for grad, p in zip(eager, model.parameters(), strict=True):
        torch.testing.assert_close(p.grad, grad, rtol=1e-4, atol=1e-5)
    model.uncompile_blocks()
    assert not model.blocks_compiled
    torch._dynamo.reset()
