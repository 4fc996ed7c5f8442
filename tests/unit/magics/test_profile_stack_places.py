"""%%profile --stack places ops from the stacks torch puts on its events.

torch 2.11 records no Python-function events with ``with_stack``: the Python frames come only
as ``FunctionEvent.stack`` strings (with the experimental ``verbose`` option), innermost first.
torch 2.13 records both. Where neither is there, the profile says so (``python_frames``).
"""

from __future__ import annotations

from torch.autograd.profiler_util import EventList, FunctionEvent

from jupyter_gpu.magics.profile.analysis import analyse
from jupyter_gpu.magics.profile.places import stack_place
from tests.fakes.fake_profile import FakeProfile

CELLS = {"<ipython-input-3-ab12>": 3, "<ipython-input-5-cd34>": 5}


def test_the_innermost_frame_of_the_users_code_is_the_place() -> None:
    frames = [
        "torch/nn/modules/linear.py(130): forward",
        "/opt/venv/lib/python3.12/site-packages/foo/bar.py(9): run",
        "<ipython-input-3-ab12>(7): forward",
        "<ipython-input-3-ab12>(15): train_step",
        "<ipython-input-5-cd34>(0): <module>",
    ]
    assert stack_place(frames, CELLS) == "cell [3] line 7 in forward"
    assert stack_place(frames[-1:], CELLS) == "cell [5]"  # module level: line 0 is left out
    assert stack_place(["/home/me/train.py(12): step"], CELLS) == "train.py:12 in step"


def test_library_frames_or_odd_strings_give_no_place() -> None:
    assert stack_place([], CELLS) == ""
    assert stack_place(["torch/nn/modules/module.py(1782): _call_impl"], CELLS) == ""
    assert stack_place(["<built-in method relu>", "not a frame"], CELLS) == ""


def _profile(stacks: dict[str, list[str]]) -> FakeProfile:
    """aten::linear over aten::addmm, then a top-level aten::relu (no Python events)."""
    events = [
        FunctionEvent(1, "aten::linear", 1, 0.0, 50.0, stack=stacks.get("aten::linear", [])),
        FunctionEvent(2, "aten::addmm", 1, 10.0, 40.0, stack=stacks.get("aten::addmm", [])),
        FunctionEvent(3, "aten::relu", 1, 60.0, 70.0, stack=stacks.get("aten::relu", [])),
    ]
    listed = EventList(events)
    listed._build_tree()
    return FakeProfile(listed)


def test_ops_are_placed_from_their_stacks_or_the_stack_of_the_op_above() -> None:
    a = analyse(
        _profile(
            {
                "aten::linear": ["<ipython-input-3-ab12>(7): forward"],
                "aten::relu": [
                    "torch/nn/functional.py(1700): relu",
                    "<ipython-input-5-cd34>(0): <module>",
                ],
            }
        ),
        cuda=False,
        autocast_on=False,
        cell_names=CELLS,
        stack=True,
    )
    called_from = {row.name: row.called_from for row in a.rows}
    assert called_from == {
        "aten::linear": "cell [3] line 7 in forward",
        "aten::addmm": "cell [3] line 7 in forward",  # no stack of its own: its parent's
        "aten::relu": "cell [5]",
    }
    assert a.python_frames


def test_a_profile_without_any_python_frame_says_so() -> None:
    a = analyse(_profile({}), cuda=False, autocast_on=False, cell_names=CELLS, stack=True)
    assert not a.python_frames
    assert all(row.called_from == "" for row in a.rows)
