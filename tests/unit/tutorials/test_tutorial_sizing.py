"""Size selection: smoke / cpu / gpu, and the machine description."""

import pytest

from jupyter_gpu.tutorials.sizing import describe_machine, pick, run_mode, smoke_requested


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1", True), ("yes", True), ("0", False), ("", False), ("false", False), (" OFF ", False)],
)
def test_smoke_requested(value: str, expected: bool) -> None:
    assert smoke_requested({"JUPYTER_GPU_SMOKE": value}) is expected


def test_smoke_wins_over_the_device() -> None:
    assert run_mode({"JUPYTER_GPU_SMOKE": "1"}) == "smoke"


def test_pick_by_mode() -> None:
    assert pick(smoke=1, cpu=2, gpu=3, mode="smoke") == 1
    assert pick(smoke=1, cpu=2, gpu=3, mode="cpu") == 2
    assert pick(smoke=1, cpu=2, gpu=3, mode="gpu") == 3
    with pytest.raises(ValueError, match="mode must be"):
        pick(smoke=1, cpu=2, gpu=3, mode="fast")


def test_machine_without_gpu_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    machine = describe_machine({"JUPYTER_GPU_SMOKE": "1"})
    assert machine.mode == "smoke"
    assert not machine.has_gpu
    assert machine.device == "cpu"
    assert "no GPU" in machine.banner()
    assert machine.as_dict()["gpu_name"] is None
