"""Memory of one full-resolution history entry (a ``Sample``, its records and its JSON text).

Fills a ``History`` ring with ``--samples`` entries built as the sampler builds them (the
simulated backend, every GPU with processes, the host, the compile cache, ``encode_sample``)
and measures what they hold with ``tracemalloc``; prints bytes per entry for 1, 2, 8 and 16
GPUs. ``JupyterGpu``'s help text and ``docs/api.md`` quote the 8-GPU figure: rerun this when a
sample gains fields.

    python benchmarks/history_memory.py
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc

from jupyter_gpu.host.reader import HostReader
from jupyter_gpu.readings.records import CacheDirSample, CompileCacheSample, Sample
from jupyter_gpu.sampling.history import Entry, History
from jupyter_gpu.server.serialize import encode_sample
from jupyter_gpu.simulated.backend import SimulatedBackend


def per_entry(gpus: int, samples: int) -> dict[str, float]:
    # Two kernels' processes per GPU, as on a shared server.
    backend = SimulatedBackend(gpus, pids=lambda: list(range(1000, 1000 + 2 * gpus)))
    host = HostReader().read()
    cache = CompileCacheSample(
        73_000_000,
        2770,
        time.time(),
        (
            CacheDirSample("inductor", "/tmp/torchinductor_user", True, 70_000_000, 2700),
            CacheDirSample("triton", "/home/user/.triton/cache", False, 0, 0),
        ),
    )
    history = History(samples)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    json_bytes = 0
    for seq in range(1, samples + 1):
        sample = Sample(
            seq=seq,
            ts=time.time(),
            backend="simulated",
            simulated=True,
            reason=None,
            devices=backend.read(),
            host=host,
            compile_cache=cache,
        )
        text = encode_sample(sample)
        json_bytes += len(text)
        history.append(Entry(sample, text))
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return {
        "gpus": gpus,
        "bytes_per_entry": round((after - before) / samples),
        "json_bytes_per_entry": round(json_bytes / samples),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--samples", type=int, default=2000)
    args = ap.parse_args()
    for gpus in (1, 2, 8, 16):
        print(json.dumps(per_entry(gpus, args.samples)), flush=True)


if __name__ == "__main__":
    main()
