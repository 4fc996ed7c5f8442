"""JSON text of the API's payloads, built once per sample (in the sampler thread)."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

from jupyter_gpu.readings import Sample

_SEPARATORS = (",", ":")


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by ``None`` (JSON has neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def dumps(payload: Any) -> str:
    """Compact JSON; a NaN or infinity (which JSON cannot carry) becomes ``null``."""
    try:
        return json.dumps(payload, separators=_SEPARATORS, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(payload), separators=_SEPARATORS, allow_nan=False)


def encode_sample(sample: Sample) -> str:
    """The ``Sample`` JSON of ``docs/api.md``."""
    return dumps(sample.to_dict())


def _age(age_s: float) -> str:
    return f"{max(0.0, age_s):.3f}"


def stream_message(sample_json: str, age_s: float) -> str:
    """The WebSocket message for one sample ``age_s`` seconds old, around its built JSON."""
    return '{"type":"sample","age_s":' + _age(age_s) + ',"sample":' + sample_json + "}"


def stream_frame(message: str) -> bytes:
    """``message`` as one WebSocket text frame from a server (RFC 6455 5.2: FIN, not masked).

    Built once per sample and written as it is to every stream socket, whose buffers then share
    it: a client that reads slowly holds references, not copies (the stream negotiates no
    compression, which would make each socket's frames its own).
    """
    payload = message.encode("ascii")  # the JSON is ASCII (json.dumps escapes the rest)
    size = len(payload)
    if size < 126:
        header = struct.pack("!BB", 0x81, size)
    elif size <= 0xFFFF:
        header = struct.pack("!BBH", 0x81, 126, size)
    else:
        header = struct.pack("!BBQ", 0x81, 127, size)
    return header + payload


def snapshot_body(sample_json: str, age_s: float) -> str:
    """The ``GET snapshot`` body: the sample's built JSON with ``age_s`` added."""
    return sample_json[:-1] + ',"age_s":' + _age(age_s) + "}"


def history_body(interval_s: float, sample_jsons: list[str]) -> str:
    """The ``GET history`` body, joining already-built sample JSON."""
    return '{"interval_s":' + dumps(interval_s) + ',"samples":[' + ",".join(sample_jsons) + "]}"
