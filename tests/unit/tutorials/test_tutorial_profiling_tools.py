"""Notebook 04's new lessons: random numbers in workers, a profile's after-effect, nsys."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from jupyter_gpu.measure import Comparison, Timing
from jupyter_gpu.tutorials import cupti_probe
from jupyter_gpu.tutorials.cupti_probe import (
    ProbeError,
    ProbeResult,
    ProbeSize,
    ProbeVariant,
    measure,
    probe_key,
)
from jupyter_gpu.tutorials.nsight import (
    find_nsys,
    parse_nvtx_sum,
    profile_command,
    run_nsys,
    steps_script,
)
from jupyter_gpu.tutorials.seeding import (
    DrawsDataset,
    draws_by_worker,
    repeats,
    reseed_held_generator,
)
from tests.helpers import ROOT, load_script


def _loader(**options: object) -> DataLoader[object]:
    return DataLoader(DrawsDataset(16), batch_size=4, num_workers=2, **options)  # type: ignore[arg-type]


def test_a_held_numpy_generator_repeats_in_every_worker_and_the_fix_does_not() -> None:
    plain = draws_by_worker(_loader())
    assert sorted(plain.held) == [0, 1]
    assert repeats(plain.held) == (8, 8)  # worker 1 draws what worker 0 drew, every time
    assert repeats(plain.global_numpy) == (0, 8)  # torch reseeds np.random per worker

    def seeded() -> DataLoader[object]:
        return _loader(
            worker_init_fn=reseed_held_generator, generator=torch.Generator().manual_seed(0)
        )

    first, again = draws_by_worker(seeded()), draws_by_worker(seeded())
    assert repeats(first.held) == (0, 8)
    assert first.held == again.held  # the same numbers on a second run
    other = draws_by_worker(
        _loader(worker_init_fn=reseed_held_generator, generator=torch.Generator().manual_seed(1))
    )
    assert other.held != first.held  # another seed, other numbers


def test_draws_in_the_main_process_and_repeats_of_one_worker() -> None:
    here = draws_by_worker(DataLoader(DrawsDataset(4), batch_size=2))
    assert list(here.held) == [-1]
    assert repeats(here.held) == (0, 0)
    reseed_held_generator(0)  # outside a worker: nothing to do
    with pytest.raises(ValueError, match="at least 1"):
        DrawsDataset(0)


# What `nsys stats --report nvtx_sum --format csv` prints (NVIDIA's Post-Collection Analysis
# Guide lists these columns), with the lines nsys prints before the table.
NVTX_SUM = """\
Generating SQLite file 04-nvtx.sqlite from 04-nvtx.nsys-rep
Processing [04-nvtx.sqlite] with [/opt/nvidia/nsight-systems/2025.1/reports/nvtx_sum.py]...
Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Style,Range
52.1,104200000,20,5210000.0,5100000.0,4900000,6100000,300000.0,PushPop,:step
24.0,48000000,20,2400000.0,2390000.0,2300000,2600000,80000.0,PushPop,:backward
not a row
"""


def test_the_nvtx_summary_is_read_from_nsys_stats_csv() -> None:
    rows = parse_nvtx_sum(NVTX_SUM)
    assert [r.name for r in rows] == [":step", ":backward"]
    assert rows[0].instances == 20
    assert rows[0].total_s == pytest.approx(0.1042)
    assert rows[0].mean_s == pytest.approx(0.00521)
    assert parse_nvtx_sum("nsys: no NVTX data in this report") == []


def test_the_nsys_command_and_its_failures_come_back_as_values(tmp_path: Path) -> None:
    script = steps_script(steps=3, size=16, batch=8, width=4)
    assert script[:3] == [sys.executable, "-m", "jupyter_gpu.tutorials.nvtx_steps"]
    command = profile_command("nsys", tmp_path / "r", script)
    assert command[:4] == ["nsys", "profile", "-t", "cuda,nvtx"]
    assert command[command.index("-o") + 1] == str(tmp_path / "r")
    missing = run_nsys(str(tmp_path / "no-nsys-here"), tmp_path / "r", script)
    assert missing.returncode == -1
    assert missing.rows == []
    assert "FileNotFoundError" in missing.problem
    found = find_nsys()
    assert found is None or Path(found).name == "nsys"


def _probe(times_ms: dict[tuple[str, str], list[float]]) -> ProbeResult:
    timings = {
        probe_key(variant, step): Timing(tuple(t / 1e3 for t in ms), warmup=1)
        for (variant, step), ms in times_ms.items()
    }
    comparison = Comparison(timings, next(iter(timings)), 8, "by hand")
    return ProbeResult(comparison, ("never profiled", "profiled once"), ("model", "pipeline"), ())


def test_a_profile_s_cost_is_read_against_the_model_alone_in_the_same_process() -> None:
    # Eight rounds with a little noise; the profiled child runs every step 1.4x slower, as a
    # process can by itself, and its pipeline 1.2x slower again only in the second case.
    noise = [1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99]
    for extra, expected in ((1.0, None), (1.2, 1.2)):
        result = _probe(
            {
                ("never profiled", "model"): [2.8 * n for n in noise],
                ("never profiled", "pipeline"): [3.0 * n for n in reversed(noise)],
                ("profiled once", "model"): [1.4 * 2.8 * n for n in noise[1:] + noise[:1]],
                ("profiled once", "pipeline"): [1.4 * extra * 3.0 * n for n in noise[::-1]],
            }
        )
        across = result.ratio("profiled once", "pipeline", against=("never profiled", "pipeline"))
        assert across.slower  # step against step, the process's own pace counts as a cost
        within = result.within_process("profiled once", against="never profiled")
        if expected is None:
            assert within.low <= 1 <= within.high, within.describe()  # no measurable difference
        else:
            assert within.slower, within.describe()
            assert 1 / within.value == pytest.approx(expected, rel=0.05)
        assert within.rounds == 8
        assert (
            within.variant
            == "profiled once: raw batches + augmentation on the device / model alone"
        )


@pytest.mark.slow
def test_processes_that_profiled_and_did_not_are_timed_in_rounds() -> None:
    size = ProbeSize("cpu", size=16, batch=8, width=4, steps_per_block=2, profile_steps=2)
    variants = {
        "never profiled": ProbeVariant(profiled=False),
        "profiled once": ProbeVariant(profiled=True),
    }
    result = measure(size, rounds=2, variants=variants, steps=("model", "pipeline"))
    assert result.variants == ("never profiled", "profiled once")
    assert result.steps == ("model", "pipeline")
    assert result.killed == ()
    assert list(result.timings) == [
        "never profiled: model alone",
        "never profiled: raw batches + augmentation on the device",
        "profiled once: model alone",
        "profiled once: raw batches + augmentation on the device",
    ]
    assert result.timings.baseline == probe_key("never profiled", "model")
    assert result.timings[probe_key("profiled once", "pipeline")].runs == 2
    assert all(t > 0 for t in result.timings[probe_key("never profiled", "model")].times_s)
    # Read against the same step in another process, or another step in the same process.
    across = result.ratio("profiled once", "pipeline", against=("never profiled", "pipeline"))
    within = result.ratio("never profiled", "pipeline", against=("never profiled", "model"))
    assert across.rounds == within.rounds == 2
    controlled = result.within_process("profiled once", against="never profiled")
    assert controlled.rounds == 2
    assert (
        controlled.baseline
        == "never profiled: raw batches + augmentation on the device / model alone"
    )
    assert within.baseline == probe_key("never profiled", "model")
    assert result.step_s("never profiled", "model") == pytest.approx(
        result.timings[probe_key("never profiled", "model")].median_s
    )
    with pytest.raises(ValueError, match="rounds"):
        measure(size, rounds=0, variants=variants)
    with pytest.raises(ValueError, match="steps must be some of"):
        measure(size, rounds=1, variants=variants, steps=("model", "no-such-step"))


@pytest.mark.slow
def test_a_child_that_does_not_exit_when_asked_is_killed_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real child that hangs at exit: Python runs sitecustomize at start-up, and this one
    # registers a sleep for the interpreter's exit (as a profiled process once hung there).
    (tmp_path / "sitecustomize.py").write_text(
        "import atexit, time\natexit.register(time.sleep, 60)\n"
    )
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)
    # Time enough for a torch process to exit on two busy cores (2 s was not, once in CI),
    # well short of the hang; every child gets the same window, at once.
    monkeypatch.setattr(cupti_probe, "QUIT_TIMEOUT_S", 10.0)
    size = ProbeSize("cpu", size=16, batch=8, width=4, steps_per_block=1)
    variants = {
        "never profiled": ProbeVariant(profiled=False),
        "hangs at exit": ProbeVariant(profiled=False, env={"PYTHONPATH": path}),
    }
    started = time.monotonic()
    result = measure(size, rounds=1, variants=variants)
    assert result.killed == ("hangs at exit",)
    assert time.monotonic() - started < 50  # stopped, not waited for
    assert result.timings[probe_key("hangs at exit", "model")].runs == 1


@pytest.mark.slow
def test_a_child_that_fails_is_reported_with_its_error() -> None:
    size = ProbeSize("no-such-device", size=16, batch=8, width=4, steps_per_block=1)
    with pytest.raises(ProbeError, match="never profiled: exited"):
        measure(size, rounds=1, variants={"never profiled": ProbeVariant(profiled=False)})


def test_a_compiled_probe_asks_its_children_to_compile_the_augmentation() -> None:
    # Notebook 04 compiles the augmentation on a GPU; its children must time the same step.
    for compiled in (False, True):
        size = ProbeSize("cpu", size=16, batch=8, width=4, steps_per_block=1, compiled=compiled)
        child = cupti_probe._Child("never profiled", ProbeVariant(profiled=False), size, ["model"])
        child.proc.kill()
        child.proc.wait()
        args = child.proc.args
        assert isinstance(args, list)
        assert ("--compile" in args) is compiled


def test_the_rounds_script_splits_each_child_s_quotient_by_the_round_s_direction() -> None:
    # The probe reverses its order every other round: in reversed rounds a child's pipeline is
    # the first block after its siblings ran. Here that block pays 50 % more, as a pause would
    # make it; the script must show the split that the median of all rounds hides.
    rounds_script = load_script(ROOT / "benchmarks" / "cupti_probe_rounds.py")
    model = [3.0] * 8
    pipeline = [3.3 if r % 2 == 0 else 4.95 for r in range(8)]
    probe = _probe(
        {
            ("never profiled", "model"): model,
            ("never profiled", "pipeline"): pipeline,
            ("profiled once", "model"): model,
            ("profiled once", "pipeline"): [3.3] * 8,
        }
    )
    split = rounds_script.quotients_by_direction(probe, "never profiled")
    assert split["forward"] == pytest.approx([1.1] * 4)
    assert split["reversed"] == pytest.approx([1.65] * 4)
    steady = rounds_script.quotients_by_direction(probe, "profiled once")
    assert steady["forward"] == pytest.approx(steady["reversed"])
    table = rounds_script.rounds_table(probe)
    assert table[:2] == ["  child 1: never profiled", "  child 2: profiled once"]
    assert table[3].split() == ["1", "forward", "3.00", "3.30", "3.00", "3.30"]
    assert table[4].split() == ["2", "reversed", "3.00", "4.95", "3.00", "3.30"]
    assert len(table) == 3 + 8


def test_the_rounds_script_rotates_which_child_starts_first() -> None:
    rounds_script = load_script(ROOT / "benchmarks" / "cupti_probe_rounds.py")
    names = list(cupti_probe.VARIANTS)
    assert list(rounds_script.rotated(dict(cupti_probe.VARIANTS), 0)) == names
    assert list(rounds_script.rotated(dict(cupti_probe.VARIANTS), 1)) == names[1:] + names[:1]
    assert list(rounds_script.rotated(dict(cupti_probe.VARIANTS), 4)) == names[1:] + names[:1]
    assert rounds_script.rotated(dict(cupti_probe.VARIANTS), 2)[names[0]].profiled is False


def test_children_start_in_the_order_asked_and_are_timed_in_the_given_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # cupti_probe_rounds.py --start reversed: which child is started first, told apart from which
    # is timed first (on an H100 the first child read the largest ratio in three runs).
    started: list[str] = []
    real_child = cupti_probe._Child

    def recording_child(name: str, *args: object) -> object:
        started.append(name)
        return real_child(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(cupti_probe, "_Child", recording_child)
    size = ProbeSize("cpu", size=16, batch=8, width=4, steps_per_block=1)
    variants = {name: ProbeVariant(profiled=False) for name in ("first", "second")}
    with pytest.raises(ValueError, match="start_order must name each variant once"):
        measure(size, rounds=1, variants=variants, start_order=["second"])
    assert started == []  # refused before any child started
    result = measure(size, rounds=1, variants=variants, start_order=["second", "first"])
    assert started == ["second", "first"]
    assert result.variants == ("first", "second")
    assert list(result.timings) == [probe_key("first", "model"), probe_key("second", "model")]
