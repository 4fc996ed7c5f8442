"""%%profile says once a process what a GPU profile leaves behind (CUPTI attached)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jupyter_gpu.magics.profile import cupti
from jupyter_gpu.magics.profile.cupti import AFTER_PROFILE_NOTE, after_profile_note


@pytest.fixture(autouse=True)
def _fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cupti, "_said_in", set())
    monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)


def test_the_first_gpu_profile_of_a_process_says_it_and_no_later_one() -> None:
    assert after_profile_note(cuda=True) == AFTER_PROFILE_NOTE
    assert after_profile_note(cuda=True) is None
    assert "TEARDOWN_CUPTI=1" in AFTER_PROFILE_NOTE


def test_a_cpu_profile_says_nothing_and_leaves_the_note_for_a_gpu_one() -> None:
    assert after_profile_note(cuda=False) is None  # a CPU profile uses no CUPTI
    assert after_profile_note(cuda=True) == AFTER_PROFILE_NOTE


@pytest.mark.parametrize(("value", "said"), [("1", False), ("0", True), ("yes", True)])
def test_only_teardown_cupti_1_tears_it_down(
    monkeypatch: pytest.MonkeyPatch, value: str, said: bool
) -> None:
    monkeypatch.setenv("TEARDOWN_CUPTI", value)  # Kineto tests for the value "1" only
    assert (after_profile_note(cuda=True) is not None) is said


def test_the_notes_figures_are_the_ones_docs_magics_keeps() -> None:
    # The note quotes measured ratios with their intervals: each must stand in the docs' table
    # it cites, so that a figure changed there cannot leave an old one in the magic's output.
    docs = (Path(__file__).parents[3] / "docs" / "magics.md").read_text()
    section = docs[docs.index("### What a profile leaves in the kernel") :]
    section = section[: section.index("\n### ", 1)]
    figures = re.findall(r"(\d+\.\d+x) slower \((\d+\.\d+-\d+\.\d+x)\)", AFTER_PROFILE_NOTE)
    assert len(figures) == 2
    for ratio, interval in figures:
        assert f"{ratio} slower ({interval})" in section
