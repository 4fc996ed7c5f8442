"""A byte-level text corpus that every machine has: the Python standard library's own source.

No download: the ``.py`` files under ``sysconfig.get_paths()["stdlib"]`` (tests, IDLE and
site-packages left out), read in sorted order so the same Python gives the same corpus. Each
byte is a token, so the vocabulary is exactly 256 (a multiple of 64, which suits tensor cores).
"""

from __future__ import annotations

import sysconfig
from dataclasses import dataclass
from pathlib import Path

import torch

VOCAB_SIZE = 256
_SKIPPED_DIRS = frozenset({"site-packages", "dist-packages", "test", "tests", "idlelib"})


def stdlib_root() -> Path:
    """The folder of the running Python's standard library."""
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_sources(root: Path | None = None) -> list[Path]:
    """The standard library's ``.py`` files, sorted, without tests, IDLE or installed packages.

    Raises:
        FileNotFoundError: no ``.py`` file was found under ``root`` (a Python without sources).
    """
    base = stdlib_root() if root is None else root
    files = sorted(
        path
        for path in base.rglob("*.py")
        if not _SKIPPED_DIRS.intersection(path.relative_to(base).parts[:-1])
    )
    if not files:
        raise FileNotFoundError(f"no Python source files under {base}")
    return files


@dataclass(frozen=True)
class Corpus:
    """Token ids (``uint8``, one per byte) split into training and validation parts."""

    train: torch.Tensor
    val: torch.Tensor
    n_files: int
    root: Path

    @property
    def n_bytes(self) -> int:
        """Total tokens (bytes) in both parts."""
        return int(self.train.numel() + self.val.numel())

    def to(self, device: str | torch.device) -> Corpus:
        """The same corpus with both parts on ``device`` (a few MB: batches are cut there)."""
        return Corpus(self.train.to(device), self.val.to(device), self.n_files, self.root)

    def describe(self) -> str:
        """One line: how much text, from where."""
        return (
            f"{self.n_bytes / 1e6:.1f} MB of Python source from {self.n_files} files under "
            f"{self.root} ({self.train.numel() / 1e6:.1f} M training tokens, "
            f"{self.val.numel() / 1e6:.2f} M validation tokens)"
        )


def load_corpus(max_bytes: int, *, val_fraction: float = 0.05, root: Path | None = None) -> Corpus:
    """Read up to ``max_bytes`` of standard-library source as byte tokens.

    Files are concatenated in sorted order, each followed by a newline; the last
    ``val_fraction`` of the bytes is the validation part.

    Raises:
        ValueError: ``max_bytes`` is too small to hold a training and a validation part, or
            ``val_fraction`` is not between 0 and 0.5.
        FileNotFoundError: see :func:`stdlib_sources`.
    """
    if not 0 < val_fraction <= 0.5:
        raise ValueError(f"val_fraction must be in (0, 0.5], not {val_fraction}")
    if max_bytes < 4096:
        raise ValueError(f"max_bytes must be at least 4096, not {max_bytes}")
    base = stdlib_root() if root is None else root
    chunks: list[bytes] = []
    total = 0
    n_files = 0
    for path in stdlib_sources(base):
        data = path.read_bytes() + b"\n"
        chunks.append(data[: max_bytes - total])
        total += len(chunks[-1])
        n_files += 1
        if total >= max_bytes:
            break
    tokens = torch.frombuffer(bytearray(b"".join(chunks)), dtype=torch.uint8)
    n_val = max(int(len(tokens) * val_fraction), 1)
    return Corpus(tokens[:-n_val].clone(), tokens[-n_val:].clone(), n_files, base)


def random_batch(
    tokens: torch.Tensor, batch: int, context: int, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` random windows of ``context`` tokens and the same windows shifted by one.

    Returns ``(inputs, targets)``, both ``int64`` of shape ``(batch, context)`` on the
    device of ``tokens``. ``generator`` (a CPU generator) makes the draw repeatable.

    Raises:
        ValueError: ``tokens`` is shorter than ``context + 1``.
    """
    if tokens.numel() <= context:
        raise ValueError(f"need more than {context} tokens, have {tokens.numel()}")
    starts = torch.randint(0, tokens.numel() - context, (batch,), generator=generator)
    if tokens.device.type == "cuda":
        # From pinned memory the copy is queued without making the CPU wait for the GPU; a
        # plain (pageable) copy would wait for every step queued before it, each step.
        starts = starts.pin_memory().to(tokens.device, non_blocking=True)
    window = starts.to(tokens.device)[:, None] + torch.arange(context + 1, device=tokens.device)
    chunk = tokens[window].long()
    return chunk[:, :-1], chunk[:, 1:]


def decode(token_ids: torch.Tensor | list[int]) -> str:
    """Bytes back to text (undecodable bytes shown as U+FFFD)."""
    values = token_ids.tolist() if isinstance(token_ids, torch.Tensor) else token_ids
    return bytes(int(v) for v in values).decode("utf-8", errors="replace")


def encode(text: str) -> torch.Tensor:
    """Text to byte tokens (``uint8``)."""
    return torch.tensor(list(text.encode("utf-8")), dtype=torch.uint8)
