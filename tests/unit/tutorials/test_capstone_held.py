"""What notebook 07's kernel still holds before the script's ranks start, and what keeps it."""

from collections import Counter

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from jupyter_gpu.tutorials.capstone.held import (
    GiB,
    HeldMemory,
    SegmentsHeld,
    describe_sizes,
    describe_weights,
    held_memory,
    largest_cuda_tensors,
    release_blas_workspaces,
    segments_held,
    weights_alive,
)
from jupyter_gpu.tutorials.capstone.model import CapstoneGPT
from jupyter_gpu.tutorials.capstone.shapes import final_shape_from_spec

MiB = 2**20


def _segment(total: int, *live: int, pool: tuple[int, int] = (0, 0)) -> dict[str, object]:
    blocks = [{"size": size, "state": "active_allocated"} for size in live]
    blocks.append({"size": total - sum(live), "state": "inactive"})
    return {
        "total_size": total,
        "active_size": sum(live),
        "segment_pool_id": pool,
        "device": 0,
        "blocks": blocks,
    }


def test_a_live_block_keeps_its_whole_segment_and_a_private_pool_keeps_everything() -> None:
    workspace = 32 * MiB
    segments = [
        _segment(4 * GiB, workspace, workspace),  # two small live blocks in a large freed segment
        _segment(2 * GiB),  # wholly free: empty_cache() gives it back
        _segment(GiB, GiB),
        _segment(3 * GiB, pool=(1, 7)),  # a CUDA graph's pool, in use or not
    ]
    held = segments_held(segments)
    assert (held.pinned_bytes, held.pinned_segments, held.pool_bytes) == (5 * GiB, 2, 3 * GiB)
    assert held.pinning_blocks == (GiB, workspace, workspace)
    assert describe_sizes(held.pinning_blocks) == "1 x 1.0 GiB, 2 x 32.0 MiB"
    # what the 16gb tier left on an H100 (2026-12-05, eighteenth session): bytes, not MiB
    assert describe_sizes([512] * 4) == "4 x 512 B"


def test_the_sentence_names_both_keepers_and_the_tensors() -> None:
    held = HeldMemory(
        reserved_bytes=24 * GiB,
        allocated_bytes=GiB + GiB // 2,
        segments=SegmentsHeld(pinned_bytes=21 * GiB, pinned_segments=40, pool_bytes=0),
        largest_tensors=(("Parameter(2048, 5504) float32", 2**30 // 23),),
    )
    text = held.describe()
    assert text.startswith("24.00 GiB reserved, 1.50 GiB of it in live tensors")
    assert "21.00 GiB in 40 segment(s) that a live tensor keeps" in text
    assert "Parameter(2048, 5504) float32" in text
    unseen = HeldMemory(GiB, GiB, SegmentsHeld(GiB, 1, 0, pinning_blocks=(32 * MiB, 32 * MiB)))
    assert "kept by live blocks of 2 x 32.0 MiB" in unseen.describe()
    assert "Python reaches none of the live tensors" in unseen.describe()


def test_fake_and_cpu_tensors_are_not_counted() -> None:
    kept = torch.ones(1024)  # a CPU tensor: not the GPU's
    with FakeTensorMode():
        fake = torch.empty(4096, 4096, device="cuda")  # says cuda; its storage is on meta
    assert fake.is_cuda
    assert not any("4096" in name for name, _size in largest_cuda_tensors(10))
    assert kept.numel() == 1024


def test_no_reading_without_cuda() -> None:
    if not torch.cuda.is_available():
        assert held_memory() is None
        assert release_blas_workspaces() is False


class _Swap:
    """Holds some of a model's modules, as 07's Float8Swap holds the blocks' Linear layers."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.pairs = [m for m in model.modules() if type(m) is torch.nn.Linear]


def test_weights_alive_sees_modules_a_forgotten_holder_keeps_after_the_model_is_gone() -> None:
    before = weights_alive()
    model = CapstoneGPT(final_shape_from_spec("d64-hd16-l2-t32"))
    for net in (model,):  # a loop variable outlives the loop: 07 kept its GPT so on an H100
        net.train()
    model = None
    assert weights_alive() - before, "the loop variable keeps every module"
    swap = _Swap(net)
    net = None
    kept = weights_alive() - before
    assert set(kept) == {"Linear"}
    assert kept["Linear"] == len(swap.pairs)
    swap = None
    assert not weights_alive() - before
    assert describe_weights(Counter()) == "no module with weights"
    assert describe_weights(Counter({"Linear": 8, "RMSNorm": 2})) == "8 Linear, 2 RMSNorm"
