"""The process's resident memory and its peak, read together: the peak is never below it."""

from __future__ import annotations

import sys

import pytest

from jupyter_gpu.magics.probes.process_memory import parse_status, read_process_memory

STATUS = """Name:\tpython
VmPeak:\t 1200000 kB
VmHWM:\t  364000 kB
VmRSS:\t  331476 kB
Threads:\t4
"""


def test_the_status_fields_are_read_in_bytes() -> None:
    reading = parse_status(STATUS)
    assert reading.rss_bytes == 331_476 * 1024
    assert reading.peak_bytes == 364_000 * 1024


def test_a_peak_below_the_resident_size_beside_it_is_not_a_peak() -> None:
    reading = parse_status(STATUS.replace("364000", "331000"))
    assert reading.rss_bytes == 331_476 * 1024
    assert reading.peak_bytes is None  # not measured, rather than a peak below the end


def test_missing_fields_are_none() -> None:
    reading = parse_status("Name:\tkthreadd\n")  # a kernel thread has no memory fields
    assert (reading.rss_bytes, reading.peak_bytes) == (None, None)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_while_the_process_grows_the_peak_is_never_below_the_resident_size() -> None:
    # getrusage's ru_maxrss (the kernel's approximate counters) read below the exact resident
    # size in every read here while the process grew: that is what made a cell's peak smaller
    # than its end.
    grown = []
    for _ in range(50):
        grown.append(bytearray(b"x" * (256 * 1024)))  # written, so resident
        reading = read_process_memory()
        assert reading.rss_bytes is not None
        assert reading.peak_bytes is not None
        assert reading.peak_bytes >= reading.rss_bytes
