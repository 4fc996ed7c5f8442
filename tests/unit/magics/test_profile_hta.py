"""%%profile's idle figures beside Holistic Trace Analysis's on the same synthetic trace.

One trace, written twice from one description (``tests/fakes/synthetic_trace.py``): as torch's
events for ``analyse`` and as the Chrome trace ``prof.export_chrome_trace`` writes, which HTA
0.5.0 reads. HTA's temporal breakdown measures idle from the first to the last GPU event of the
steps it keeps (``BreakdownAnalysis._get_idle_time_for_kernels``); ours is over whole step
periods (``jupyter_gpu/magics/profile/idle.py``). On the same window the two must agree, and so
must the split of the idle time (HTA's ``get_idle_time_breakdown``); over 20 steps the two
windows agree within 2 points; over 2 they differ as docs/magics.md says.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpu.magics.profile.analysis import analyse
from jupyter_gpu.magics.profile.idle import first_to_last_idle, idle_breakdown
from tests.fakes.fake_profile import FakeProfile
from tests.fakes.synthetic_trace import SyntheticTrace, ground_truth_loop

hta_trace_analysis = pytest.importorskip("hta.trace_analysis")  # the [test] extra installs it
# HTA 0.5.0 calls pandas APIs that pandas 3 deprecates: its warnings, not ours
pytestmark = pytest.mark.filterwarnings(r"ignore::Warning:hta\.")

KERNEL_US = 2000.0
HOST_US = {0.25: KERNEL_US / 3, 0.5: KERNEL_US, 0.75: 3 * KERNEL_US}


def hta(trace: SyntheticTrace, folder: Path) -> Any:
    """HTA's analysis of the trace, every measured step kept (as ours keeps them)."""
    folder.mkdir()
    trace.write(folder / "rank-0.json")
    logging.getLogger("hta").setLevel(logging.ERROR)  # its notes on parsing, not ours to read
    return hta_trace_analysis.TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=True)


def hta_idle(analysis: Any) -> float:
    """HTA's temporal breakdown: the idle share of rank 0 (0-1)."""
    df = analysis.get_temporal_breakdown(visualize=False)
    return float(df["idle_time_pctg"].iloc[0]) / 100


@pytest.mark.parametrize("target", [0.25, 0.5, 0.75])
@pytest.mark.parametrize("steps", [2, 20])
def test_hta_and_ours_agree_on_the_same_window(target: float, steps: int, tmp_path: Path) -> None:
    trace, true = ground_truth_loop(steps, KERNEL_US, HOST_US[target])
    ours = analyse(FakeProfile(trace.events()), cuda=True, autocast_on=False, cell_names={})
    theirs = hta_idle(hta(trace, tmp_path / "trace"))
    # HTA's definition, computed from our reading of the events: the same figure
    first_to_last = first_to_last_idle(ours.activity)
    assert first_to_last is not None
    assert theirs == pytest.approx(first_to_last, abs=0.02)
    assert ours.gpu_idle_fraction == pytest.approx(true, abs=0.001)
    if steps == 20:  # whole periods and first-to-last differ by one gap in 20: within 2 points
        assert theirs == pytest.approx(ours.gpu_idle_fraction, abs=0.02)
    else:  # one gap in two: HTA reads (N-1)S/(NK+(N-1)S), docs/magics.md explains it
        assert ours.gpu_idle_fraction - theirs > 0.05


def test_the_split_of_idle_time_is_htas(tmp_path: Path) -> None:
    # one step of every kind of gap: waiting on the host, launch overhead between queued
    # kernels, a queued kernel waiting on other work
    trace = SyntheticTrace()
    trace.step(0, 0.0, 1000.0)
    trace.launch(1.0, (10.0, 110.0))  # queued early: runs back to back with the next ones
    trace.launch(2.0, (120.0, 220.0))  # 10 µs after the first: launch overhead
    trace.launch(3.0, (420.0, 520.0))  # queued at 3 µs, starts 200 µs after: other work
    trace.launch(700.0, (710.0, 810.0))  # launched after the GPU went idle: the host
    trace.step(1, 1000.0, 2000.0)
    trace.launch(1001.0, (1010.0, 1110.0))
    ours = analyse(FakeProfile(trace.events()), cuda=True, autocast_on=False, cell_names={})
    df, _ = hta(trace, tmp_path / "trace").get_idle_time_breakdown(visualize=False)
    theirs = {row.idle_category: float(row.idle_time) for row in df.itertuples()}
    # HTA splits the gaps between the first and the last kernel: the same span here
    start = min(a.start for a in ours.activity)
    end = max(a.end for a in ours.activity)
    split = idle_breakdown(ours.activity, start, end)
    assert split["host"] * 1e6 == pytest.approx(theirs["host_wait"], abs=2.0)  # HTA rounds to µs
    assert split["kernels"] * 1e6 == pytest.approx(theirs["kernel_wait"], abs=2.0)
    assert split["other"] * 1e6 == pytest.approx(theirs["other"], abs=2.0)
    assert (split["host"], split["kernels"], split["other"]) == pytest.approx(
        (390e-6, 10e-6, 200e-6)
    )


def test_a_copy_alone_is_idle_for_us_and_busy_for_hta(tmp_path: Path) -> None:
    # Ours counts time when only a copy runs as idle "on copies"; HTA's temporal breakdown
    # counts every GPU event as work. The difference is exactly that time.
    trace = SyntheticTrace()
    trace.step(0, 0.0, 1000.0)
    trace.launch(1.0, (10.0, 410.0))
    trace.launch(420.0, (430.0, 630.0), name="Memcpy HtoD (Pinned -> Device)")
    trace.launch(640.0, (650.0, 1000.0))
    ours = analyse(FakeProfile(trace.events()), cuda=True, autocast_on=False, cell_names={})
    theirs = hta_idle(hta(trace, tmp_path / "trace"))
    assert ours.idle_s["copies"] == pytest.approx(200e-6)
    first_to_last = first_to_last_idle(ours.activity)
    assert first_to_last == pytest.approx(theirs, abs=0.005)
    window = ours.window_s
    assert ours.gpu_idle_fraction == pytest.approx(theirs + 200e-6 / window, abs=0.01)
