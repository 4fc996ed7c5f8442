"""The standard-library corpus: present everywhere, deterministic, byte tokens."""

from pathlib import Path

import pytest
import torch

from jupyter_gpu.tutorials.corpus import (
    decode,
    encode,
    load_corpus,
    random_batch,
    stdlib_sources,
)


def test_sources_skip_tests_and_site_packages() -> None:
    files = stdlib_sources()
    assert len(files) > 100
    assert files == sorted(files)
    assert not any("site-packages" in f.parts or "test" in f.parts for f in files)


def test_corpus_is_deterministic_and_split() -> None:
    a = load_corpus(100_000)
    b = load_corpus(100_000)
    assert a.n_bytes == 100_000
    assert torch.equal(a.train, b.train)
    assert a.val.numel() == 5_000
    assert a.train.dtype == torch.uint8
    assert "import" in decode(a.train[:20_000])


def test_corpus_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="val_fraction"):
        load_corpus(100_000, val_fraction=0.9)
    with pytest.raises(ValueError, match="max_bytes"):
        load_corpus(10)
    with pytest.raises(FileNotFoundError, match="no Python source"):
        load_corpus(100_000, root=tmp_path)


def test_random_batch_targets_are_shifted_inputs() -> None:
    tokens = torch.arange(200, dtype=torch.uint8)
    gen = torch.Generator().manual_seed(0)
    x, y = random_batch(tokens, 4, 16, gen)
    assert x.shape == y.shape == (4, 16)
    assert x.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    assert torch.equal(y - x, torch.ones_like(x))  # arange: each next token is one more
    with pytest.raises(ValueError, match="need more than"):
        random_batch(tokens[:10], 1, 16)


def test_encode_decode_round_trip() -> None:
    text = "def f(x):\n    return x  # ünïcode"
    assert decode(encode(text)) == text
