"""Show small grayscale images inline without Pillow or matplotlib: a minimal PNG encoder."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

import numpy as np


def png_bytes(image: np.ndarray) -> bytes:
    """Encode a 2-D array as an 8-bit grayscale PNG, scaled from its own min..max to 0..255.

    Raises:
        ValueError: ``image`` is not 2-D or is empty.
    """
    if image.ndim != 2 or image.size == 0:
        raise ValueError(f"need a non-empty 2-D array, got shape {image.shape}")
    lo, hi = float(image.min()), float(image.max())
    scaled = (image - lo) / (hi - lo) if hi > lo else np.zeros_like(image, dtype=np.float64)
    pixels = (scaled * 255).round().astype(np.uint8)
    height, width = pixels.shape
    # Each row starts with filter type 0 (none).
    raw = b"".join(b"\x00" + pixels[row].tobytes() for row in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit grayscale
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


def image_grid(images: Sequence[np.ndarray], columns: int = 8, gap: int = 2) -> np.ndarray:
    """Tile same-sized 2-D images into one array, ``columns`` per row, ``gap`` pixels apart.

    Raises:
        ValueError: no images, or images of different shapes.
    """
    if not images:
        raise ValueError("need at least one image")
    shape = images[0].shape
    if any(img.shape != shape for img in images):
        raise ValueError("all images must have the same shape")
    h, w = shape
    rows = -(-len(images) // columns)
    cols = min(columns, len(images))
    grid = np.full((rows * (h + gap) - gap, cols * (w + gap) - gap), np.nan)
    for i, img in enumerate(images):
        r, c = divmod(i, columns)
        grid[r * (h + gap) : r * (h + gap) + h, c * (w + gap) : c * (w + gap) + w] = img
    fill = np.nanmin(grid)
    return np.where(np.isnan(grid), fill, grid)
