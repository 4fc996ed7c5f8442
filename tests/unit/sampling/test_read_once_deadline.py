"""``read_once`` (behind ``%gpu`` and ``%memsummary``) answers within its deadline on a hung GPU.

Over the fake NVML, put where ``import pynvml`` finds it (as the magics' tests do). The time
bounds leave a second of room over the deadline and the 0.1 s window, for busy cores.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator

import pytest

from jupyter_gpu.sampling import read_once
from tests.fakes.fake_nvml import FakeNvml

DEADLINE = 0.5
ROOM_S = 1.0


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeNvml]:
    fake = FakeNvml(devices=3)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    yield fake
    for i in range(len(fake.devices)):
        fake.release(i)
    for thread in threading.enumerate():  # the workers that were stuck in the hung calls
        if thread.name.startswith("jupyter-gpu"):
            thread.join(10)


def timed_read() -> tuple[float, object]:
    start = time.monotonic()
    sample = read_once("nvml", deadline_s=DEADLINE)
    return time.monotonic() - start, sample


@pytest.mark.parametrize(
    "calls",
    [None, {"nvmlGpmSampleGet"}, {"nvmlDeviceGetTemperature"}],
    ids=["every-call", "gpm-only", "one-fast-read"],
)
def test_a_hung_gpu_is_named_and_the_others_read(fake: FakeNvml, calls: set[str] | None) -> None:
    fake.hang(1, calls=calls)
    took, sample = timed_read()
    assert took < DEADLINE + 0.1 + ROOM_S
    d0, d1, d2 = sample.devices  # type: ignore[attr-defined]
    assert d1.state == "not_responding"
    assert d1.error.startswith(f"GPU 1 did not answer within {DEADLINE:g} s")
    assert d1.util_pct is None
    assert d1.stale == ("fast",)
    for d in (d0, d2):
        assert d.state == "ok"
        assert (d.util_pct, d.sm_active_pct) == (50.0, 78.0)
        assert d.stale == ()
        assert d.read_age_s is not None
        assert d.read_age_s < DEADLINE + 0.1 + ROOM_S
        assert d.gpm_age_s is not None
    hung_calls = fake.hung_calls
    # Asked again while the call is out: that kind of call is not made again on the hung GPU
    # (no thread more); a GPU whose GPM alone hangs then gives its fast readings.
    took, sample = timed_read()
    assert took < DEADLINE + 0.1 + ROOM_S
    again = sample.devices[1]  # type: ignore[attr-defined]
    if calls == {"nvmlGpmSampleGet"}:
        assert (again.state, again.util_pct, again.sm_active_pct) == ("ok", 50.0, None)
    else:
        assert again.state == "not_responding"
    assert fake.hung_calls == hung_calls
    assert fake.shutdowns < fake.inits  # the first NVML user waits for its hung call
    fake.release(1)
    for thread in threading.enumerate():
        if thread.name.startswith("jupyter-gpu"):
            thread.join(10)
    assert fake.shutdowns == fake.inits  # shut down by the call that returned


def test_no_hang_reads_every_gpu_with_its_ages(fake: FakeNvml) -> None:
    took, sample = timed_read()
    assert took < 0.1 + ROOM_S
    assert [d.state for d in sample.devices] == ["ok"] * 3  # type: ignore[attr-defined]
    for d in sample.devices:  # type: ignore[attr-defined]
        assert d.sm_active_pct == 78.0
        assert d.read_age_s is not None
        assert d.gpm_age_s is not None
        assert d.pcie_age_s is None  # not asked for (slow=False)
    assert fake.shutdowns == fake.inits == 1


def test_memsummarys_nvml_view_names_the_gpu_that_did_not_answer(
    fake: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jupyter_gpu.magics.probes import allocator
    from jupyter_gpu.magics.shell.lazy_torch import torch_module

    # torch's CUDA device 0 is the fake's GPU 1 (torch is CPU-only here: its UUID is given).
    monkeypatch.setattr(allocator, "torch_uuid", lambda index: fake.devices[1].uuid[4:])
    fake.hang(1)
    torch_module()  # imported before the clock starts: seconds on a busy machine
    start = time.monotonic()
    view = allocator.nvml_process_view(0)
    assert time.monotonic() - start < 2.0 + 0.1 + ROOM_S  # read_once's default deadline
    assert view.used_bytes is None
    assert view.reason is not None
    assert view.reason.startswith("GPU 1 did not answer within 2 s")
