"""``%%memsummary -o``'s peak when the cell stayed below an earlier peak (counter not reset)."""

from __future__ import annotations

from jupyter_gpu.magics.memory.results import CellMemory
from jupyter_gpu.magics.probes.peak import PeakReading

GiB = 2**30


def _below_an_earlier_peak(requested_peak: int | None, source: str = "trace") -> CellMemory:
    # As notebook 07's checkpointing trial on an H200: 4.4 GiB in use, an earlier peak of
    # 30 GiB that torch's counter still reads, and the trace's peak 20.8 GiB above the start
    # (in requested bytes, counted from the requested bytes in use at the start).
    start, requested_start = int(4.4 * GiB), int(4.3 * GiB)
    reading = PeakReading(
        device=0,
        start_bytes=start,
        requested_start_bytes=requested_start,
        counter_before_bytes=30 * GiB,
        source=source,
        requested_peak_bytes=requested_peak,
        note="" if requested_peak is not None else "no allocator trace was recorded",
    )
    return CellMemory("cuda:0", start, start + 512, None, 30 * GiB, peak=reading)


def test_the_counters_exact_peak_first() -> None:
    cell = CellMemory("cuda:0", 4 * GiB, 4 * GiB, 9 * GiB, 5 * GiB)
    assert cell.best_known_peak_bytes == 9 * GiB
    assert "peak 9.0 GiB" in repr(cell)


def test_below_an_earlier_peak_the_start_plus_the_traces_rise() -> None:
    rise = int(20.8 * GiB)
    cell = _below_an_earlier_peak(int(4.3 * GiB) + rise)
    assert cell.peak_bytes is None  # by design: the counter cannot tell
    assert cell.best_known_peak_bytes == int(4.4 * GiB) + rise
    # The repr shows the trace's figure, in its own (requested) terms, not "n/a".
    assert "peak 25.1 GiB requested" in repr(cell)
    assert "n/a" not in repr(cell)


def test_none_when_neither_is_known() -> None:
    cell = _below_an_earlier_peak(None, source="none")
    assert cell.best_known_peak_bytes is None
    assert "peak n/a" in repr(cell)
    # On CPU: the process's peak RSS did not rise, and there is no trace.
    assert CellMemory("cpu", GiB, GiB, None, 2 * GiB).best_known_peak_bytes is None
    # No memory at the start (CUDA not started): no figure to add the rise to.
    cell.before_bytes = None
    assert cell.best_known_peak_bytes is None
