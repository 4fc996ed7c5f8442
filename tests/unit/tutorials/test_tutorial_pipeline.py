"""Notebook 04's pipelines: CPUs from the quota, raw batches, the batch augmentation, pinning."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from jupyter_gpu.tutorials.digits import (
    PIXEL_MEAN,
    PIXEL_STD,
    PREFETCH_FACTOR,
    AugmentedDigits,
    load_digits_splits,
    upscale,
    upscaled_tensor,
)
from jupyter_gpu.tutorials.pinning import (
    change_text,
    compare,
    explain_pinning,
    host_copies,
)
from jupyter_gpu.tutorials.pipeline import (
    RawDigitBatches,
    Throughput,
    augment_on_device,
    resample,
    shm_workers,
)


def test_shm_workers_counts_the_batches_that_fit(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    batch_bytes = 4 * 2**20
    assert shm_workers(batch_bytes, tmp_path) == int(free / 2 // (PREFETCH_FACTOR * batch_bytes))
    assert shm_workers(free, tmp_path) == 0  # one batch larger than half the space: none fit
    assert shm_workers(batch_bytes, tmp_path / "missing") is None


def test_raw_batches_shuffle_each_pass_and_keep_labels_with_images() -> None:
    train, _ = load_digits_splits()
    batches = RawDigitBatches(train, 100, seed=1)
    seen = []
    for _ in range(len(train) // 100):
        x, y = next(batches)
        assert x.shape == (100, 1, 8, 8)
        assert x.dtype == torch.float32
        for image, label in zip(x[:3], y[:3], strict=True):
            match = np.flatnonzero((train.images == image[0].numpy()).all(axis=(1, 2)))
            assert int(label) in {int(train.labels[i]) for i in match}
        seen.append(y)
    first_pass = torch.cat(seen)
    assert len(first_pass) == 100 * (len(train) // 100)
    again = torch.cat([next(batches)[1] for _ in range(len(train) // 100)])
    assert not torch.equal(first_pass, again)  # a new shuffle
    with pytest.raises(ValueError, match="batch"):
        RawDigitBatches(train, len(train) + 1)


def test_resample_samples_the_grid_of_the_cpu_upscaling() -> None:
    train, _ = load_digits_splits()
    images = torch.from_numpy(train.images[:3])[:, None]
    params = [(0.0, 1.0, (0.0, 0.0)), (0.2, 0.9, (0.5, -0.3)), (-0.25, 1.15, (-0.7, 0.7))]
    out = resample(
        images,
        32,
        torch.tensor([p[0] for p in params]),
        torch.tensor([p[1] for p in params]),
        torch.tensor([p[2] for p in params]),
    )
    for i, (angle, scale, shift) in enumerate(params):
        expected = upscale(train.images[i], 32, angle=angle, scale=scale, shift=shift)
        assert np.abs(out[i, 0].numpy() - expected).max() < 1e-5
    plain, _ = upscaled_tensor(train, 32)  # no jitter: the validation images, normalised
    assert torch.allclose((out[0] - PIXEL_MEAN) / PIXEL_STD, plain[0], atol=1e-5)
    with pytest.raises(ValueError, match="shape"):
        resample(images[:, 0], 32, *(torch.zeros(3),) * 2, torch.zeros(3, 2))


def test_augmentation_draws_the_same_jitter_as_the_cpu_dataset() -> None:
    torch.manual_seed(0)
    train, _ = load_digits_splits()
    dataset = AugmentedDigits(train, 24, length=256)
    cpu = torch.stack([dataset[i][0] for i in range(256)])
    raw = torch.from_numpy(train.images[np.arange(256) % len(train)])[:, None]
    batch = augment_on_device(raw, 24)
    assert batch.shape == cpu.shape
    assert abs(float(batch.mean() - cpu.mean())) < 0.05
    assert abs(float(batch.std() - cpu.std())) < 0.05
    again = augment_on_device(raw, 24)
    assert not torch.equal(batch, again)  # fresh jitter per call
    plain, _ = upscaled_tensor(train, 24)
    assert float((batch - plain[:256]).abs().mean()) > 0.05  # and it is jitter, not a copy


def test_throughput_reports_median_and_spread() -> None:
    t = Throughput((90.0, 100.0, 110.0))
    assert t.median == 100.0
    assert t.spread == pytest.approx(0.2)
    assert str(t) == "100 images/s (windows 90 to 110)"
    with pytest.raises(ValueError, match="one positive rate per window"):
        Throughput(())


def test_host_copies_add_up_the_profiles_copy_rows() -> None:
    def row(name: str, calls: int, gpu_s: float) -> SimpleNamespace:
        return SimpleNamespace(name=name, calls=calls, self_gpu_s=gpu_s)

    rows = [
        row("Memcpy HtoD (Pinned -> Device)", 20, 0.002),
        row("Memcpy DtoH (Device -> Pageable)", 3, 0.5),
        row("void at::native::kernel", 100, 0.4),
    ]
    copies = host_copies(rows)
    assert (copies.calls, copies.gpu_s, copies.pinned) == (20, 0.002, True)
    assert copies.per_step(10) == pytest.approx(0.0002)
    both = host_copies([*rows, row("Memcpy HtoD (Pageable -> Device)", 1, 0.1)])
    assert both.pinned is None
    assert host_copies([]).pinned is None


def _explain(
    plain: Throughput, pinned: Throughput, pin_s: float = 1e-5, copy_s: float = 280e-6
) -> list[str]:
    return explain_pinning(
        plain=plain,
        pinned=pinned,
        pageable_copy_s=copy_s,
        pinned_copy_s=90e-6,
        batch_bytes=4 * 2**20,
        pin_s=pin_s,
        batch=256,
        host_idle_share=0.99,
    )


def test_pinning_within_the_noise_is_called_no_effect() -> None:
    # The H200 run of issue 21: 12,019 without, 10,894 with, windows as wide as that.
    lines = _explain(
        Throughput((9_767.0, 12_019.0, 12_500.0)), Throughput((10_200.0, 10_894.0, 11_900.0))
    )
    assert "within the" in lines[-1]
    assert "no effect measured, as expected" in lines[-1]
    assert "4.00 MiB" in lines[0]
    assert "GB/s" in lines[0]
    assert "99% of the GPU's idle time was spent waiting on the host" in lines[2]
    # The same throughputs where the copy was 40% of a step: no effect is then unexplained.
    slow_copy = _explain(
        Throughput((9_767.0, 12_019.0, 12_500.0)),
        Throughput((10_200.0, 10_894.0, 11_900.0)),
        copy_s=10e-3,
    )
    assert "although a faster copy could save up to" in slow_copy[-1]


def test_pinning_beyond_the_noise_says_what_the_figures_explain() -> None:
    plain = Throughput((10_000.0, 10_100.0, 10_200.0))
    slower = _explain(plain, Throughput((8_000.0, 8_050.0, 8_100.0)))[-1]
    assert "beyond the" in slower
    assert "no cause for the rest is in these figures" in slower  # 20% slower, costs 0.1%
    costly = _explain(plain, Throughput((9_700.0, 9_750.0, 9_800.0)), pin_s=600e-6)[-1]
    assert "costs more than it saves" in costly  # pinning 600 µs of a 26 ms step: about 2-3%
    steady = Throughput((10_095.0, 10_100.0, 10_105.0))
    faster = _explain(steady, Throughput((10_190.0, 10_200.0, 10_210.0)), pin_s=1e-6)[-1]
    assert faster.startswith("Measured")
    assert "about what the shorter copy can save" in faster


def test_compare_and_change_text() -> None:
    a, b = Throughput((100.0, 101.0, 102.0)), Throughput((120.0, 121.0, 122.0))
    change, beyond = compare(a, b)
    assert change == pytest.approx(121 / 101 - 1)
    assert beyond
    assert change_text(a, b).startswith("+20%, beyond")
    assert "within" in change_text(a, Throughput((100.0, 101.5, 103.0)))
