"""Simulated faults: the spec parser, the simulated backend on a stepped clock, the config."""

from __future__ import annotations

import math

import pytest
from traitlets import TraitError
from traitlets.config import Config

from jupyter_gpu.config import JupyterGpu
from jupyter_gpu.simulated import SimulatedFault, parse_faults
from jupyter_gpu.simulated.backend import SimulatedBackend
from jupyter_gpu.simulated.faults import SIMULATED_NOT_SUPPORTED, parse_fault, start_up_hang_s


class Clock:
    """A monotonic clock the test steps by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("lost:1@10", SimulatedFault("lost", 1, None, 10.0, None, "lost:1@10")),
        ("lost:0", SimulatedFault("lost", 0, None, 0.0, None, "lost:0")),
        (" error:2@5-20.5 ", SimulatedFault("error", 2, None, 5.0, 20.5, "error:2@5-20.5")),
        (
            "unsupported:0:power_w",
            SimulatedFault("unsupported", 0, "power_w", 0.0, None, "unsupported:0:power_w"),
        ),
        (
            "unsupported:15:processes@0.5",
            SimulatedFault(
                "unsupported", 15, "processes", 0.5, None, "unsupported:15:processes@0.5"
            ),
        ),
        ("hang:init", SimulatedFault("hang", None, None, 0.0, None, "hang:init")),
        ("hang:init@0-30", SimulatedFault("hang", None, None, 0.0, 30.0, "hang:init@0-30")),
    ],
)
def test_specs_parse(spec: str, expected: SimulatedFault) -> None:
    assert parse_fault(spec) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "is not one of: lost:<gpu>"),
        ("lost", "is not one of"),
        ("lost:-1", "is not one of"),
        ("lost:a", "is not one of"),
        ("melted:0", "unknown kind 'melted'"),
        ("lost:16", "GPU index must be 0 to 15"),
        ("lost:0:power_w", "only 'unsupported' takes a field"),
        ("unsupported:0", "needs a field, one of util_pct"),
        ("unsupported:0:voltage", "needs a field"),
        ("lost:0@-1", "is not one of"),
        ("lost:0@10-5", "end must be after the start"),
        ("lost:0@10-10", "end must be after the start"),
        ("lost:0@90000", "start must be 0 to 86400"),
        ("lost:0@nan", "is not one of"),
        ("lost:init", "only 'hang' applies to the start-up"),
        ("unsupported:init:power_w", "only 'hang' applies to the start-up"),
        ("hang:init@5", "begins when the server starts: write hang:init"),
        ("hang:init@0", "begins when the server starts"),
        ("hang:init@5-10", "begins when the server starts"),
        ("hang:init@0-90000", "the end must be after 0 and at most 86400"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_fault(spec)


def test_a_start_up_hang_blocks_until_its_end() -> None:
    faults = parse_faults(["hang:init@0-30", "lost:0"])
    assert start_up_hang_s(faults, 10.0) == 20.0
    assert start_up_hang_s(faults, 30.0) is None
    assert start_up_hang_s(parse_faults(["hang:init"]), 1e6) == math.inf
    assert start_up_hang_s(parse_faults(["hang:0"]), 0.0) is None  # a GPU's hang: not start-up
    # Only the start-up: the simulated GPUs read as usual once it has opened.
    backend = SimulatedBackend(1, faults=faults[:1])
    assert backend.read_group("fast", 0).state == "ok"


def test_too_many_faults_are_refused() -> None:
    assert len(parse_faults(["lost:0"] * 64)) == 64
    with pytest.raises(ValueError, match="at most 64"):
        parse_faults(["lost:0"] * 65)


def test_faults_follow_their_schedule() -> None:
    clock = Clock()
    backend = SimulatedBackend(
        3,
        clock=clock,
        faults=parse_faults(["lost:1@10", "error:2@5-20", "unsupported:0:power_w"]),
    )
    states = []
    for t in (0.0, 6.0, 12.0, 25.0):
        clock.now = 1000.0 + t
        states.append([d.state for d in backend.read()])
    assert states == [
        ["ok", "ok", "ok"],
        ["ok", "ok", "error"],
        ["ok", "lost", "error"],
        ["ok", "lost", "ok"],  # the error ended at 20 s; a lost GPU stays lost
    ]


def test_a_faulty_device_looks_as_nvml_would_show_it() -> None:
    clock = Clock()
    backend = SimulatedBackend(
        2,
        clock=clock,
        pids=lambda: [101, 102],
        faults=parse_faults(["lost:1", "unsupported:0:power_w", "unsupported:0:processes"]),
    )
    d0, d1 = backend.read()
    assert (d0.state, d0.power_w, d0.processes) == ("ok", None, ())
    assert dict(d0.unavailable) == {
        "power_w": SIMULATED_NOT_SUPPORTED,
        "processes": SIMULATED_NOT_SUPPORTED,
    }
    assert d0.util_pct is not None
    assert d0.temperature_c is not None
    assert d1.state == "lost"
    assert d1.error is not None
    assert "Simulated" in d1.error
    assert (d1.util_pct, d1.mem_used_bytes, d1.processes) == (None, None, ())
    assert d1.name == "Simulated NVIDIA H200"  # still says which GPU it is


def test_slow_metrics_follow_the_faults() -> None:
    clock = Clock()
    backend = SimulatedBackend(
        3, clock=clock, faults=parse_faults(["lost:1", "unsupported:2:pcie_rx_bytes_per_s"])
    )
    slow = {i: dict(r.values) for i, r in backend.read_all("pcie").items()}
    tx_rx = ("pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s")
    assert slow[1] == dict.fromkeys(tx_rx)
    assert slow[2]["pcie_tx_bytes_per_s"] is not None
    assert slow[2]["pcie_rx_bytes_per_s"] is None
    assert None not in slow[0].values()


def test_a_fault_on_a_missing_device_is_refused() -> None:
    with pytest.raises(ValueError, match="only 2 simulated GPUs"):
        SimulatedBackend(2, faults=parse_faults(["lost:2"]))


def make(**values: object) -> JupyterGpu:
    return JupyterGpu(config=Config({"JupyterGpu": values}))


def test_config_takes_a_list_of_specs() -> None:
    assert make().simulated_faults == []
    c = make(simulated_faults=["lost:1@10", "unsupported:0:power_w"], simulated_devices=2)
    assert c.simulated_faults == ["lost:1@10", "unsupported:0:power_w"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"simulated_faults": ["lost:x"]}, "JupyterGpu.simulated_faults: simulated fault 'lost:x'"),
        ({"simulated_faults": ["lost:2"]}, "'lost:2' is on GPU 2.*simulated_devices is 2"),
        # the device bound does not depend on the order the options come in
        ({"simulated_faults": ["lost:3"], "simulated_devices": 3}, "simulated_devices is 3"),
        ({"simulated_devices": 3, "simulated_faults": ["lost:3"]}, "simulated_devices is 3"),
    ],
)
def test_config_refuses_bad_faults(values: dict[str, object], message: str) -> None:
    with pytest.raises(TraitError, match=message):
        make(**values)


def test_the_option_has_help_with_an_example() -> None:
    help_text = JupyterGpu.class_traits()["simulated_faults"].help
    assert "lost:1@10" in help_text
    assert "simulated" in help_text
    assert "'hang:<gpu>'" in help_text
    assert "'hang:init'" in help_text
