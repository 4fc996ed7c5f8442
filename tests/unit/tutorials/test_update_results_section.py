"""benchmarks/update_results.py --section: one notebook's run in a section of its own."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "benchmarks" / "update_results.py"


def capstone_json(folder: Path, tier: dict | None = None, gpu_name: str = "NVIDIA H200") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    machine = {
        "mode": "gpu",
        "device": "cuda",
        "gpu_name": gpu_name,
        "gpu_memory_bytes": 150_000_000_000,
        "gpu_count": 1,
        "torch_version": "2.11.0",
        "cuda_version": "13.0",
        "python_version": "3.12.3",
        "cpu_count": 16,
    }
    run = {
        "schema": 1,
        "notebook": "07-capstone",
        "machine": machine,
        "tier": tier,
        "date": "2026-12-02 10:00:00 UTC",
        "elapsed_s": 400.0,
        "figures": [
            {
                "key": "shape_tflops",
                "label": "9 · shape: model TFLOP/s",
                "value": 512.0,
                "unit": "TFLOP/s",
                "detail": "MFU 65%",
            }
        ],
        "checks": [
            {
                "key": "final_tflops",
                "label": "final step, model TFLOP/s",
                "value": 512.0,
                "target": 500.0,
                "unit": "TFLOP/s",
                "met": True,
                "applies_to": "H200",
            }
        ],
    }
    (folder / "07-capstone.json").write_text(json.dumps(run))


def update(folder: Path, md: Path, *extra: str) -> None:
    command = [sys.executable, str(SCRIPT), str(folder), "--results-md", str(md), *extra]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_a_named_section_leaves_the_tutorials_alone(tmp_path: Path) -> None:
    md = tmp_path / "RESULTS.md"
    md.write_text("# Measured results\n\n## Tutorials on one H200 (x)\n\n00 to 06\n")
    capstone_json(tmp_path / "full")
    update(tmp_path / "full", md, "--section", "Capstone")
    capstone_json(tmp_path / "16gb", {"tier": "16gb", "bf16": False, "emulated": True})
    update(tmp_path / "16gb", md, "--section", "Capstone", "--tier", "16gb")
    update(tmp_path / "full", md, "--section", "Capstone")  # again: replaced, not appended
    text = md.read_text()
    assert "## Tutorials on one H200 (x)\n\n00 to 06\n" in text
    assert text.count("## Capstone on one H200") == 1
    assert text.count("## Capstone at the 16gb tier, emulated on one H200") == 1
    full = text[text.index("## Capstone on one H200") : text.index("## Capstone at the 16gb")]
    assert "| 9 · shape: model TFLOP/s | 512.0 TFLOP/s | MFU 65% |" in full
    target_row = (
        "| 07-capstone | final step, model TFLOP/s >= 500.0 TFLOP/s | 512.0 TFLOP/s | yes |"
    )
    assert target_row in full
    assert "h200-notebooks/" not in full  # the HTML copies are the tutorials' run's


def test_conditions_are_written_below_the_machine(tmp_path: Path) -> None:
    md = tmp_path / "RESULTS.md"
    capstone_json(tmp_path / "full")
    update(tmp_path / "full", md, "--section", "Capstone", "--conditions", "beside the suite")
    text = md.read_text()
    machine = text.index("Machine:")
    assert machine < text.index("\n\nConditions: beside the suite\n\n") < text.index("### 07")


def test_a_run_of_some_notebooks_keeps_the_others_and_the_text_it_did_not_write(
    tmp_path: Path,
) -> None:
    # What happened twice: a run of 03 and 04 rewrote the section and dropped 00-02 and 05
    # (2026-12-05, merged by hand), and a run of 00-05 dropped the explanation of notebook 01's
    # target written under *Targets* (2026-12-02), which the notebook cites.
    md = tmp_path / "RESULTS.md"
    md.write_text(
        "# Measured results\n\n## Tutorials on one H200 (`update_results.py`)\n\n"
        "Written by `benchmarks/update_results.py` from the JSON files.\n\n"
        "Machine: NVIDIA H200 (140 GiB). Date: 2026-12-02.\n\n"
        "### 00-start-here (ran 15 s)\n\n| figure | value | how |\n|---|---:|---|\n"
        "| matrix products: useful work | 665.3 TFLOP/s |  |\n\n"
        "### 07-capstone (ran 300 s)\n\n| figure | value | how |\n|---|---:|---|\n"
        "| 9 · shape: model TFLOP/s | 400 TFLOP/s |  |\n\n"
        "### Targets\n\n| notebook | target | measured | met |\n|---|---|---:|---|\n"
        "| 00-start-here | a target of 00 >= 1.00x | 2.00x | yes |\n"
        "| 07-capstone | final step, model TFLOP/s >= 500 TFLOP/s | 400 TFLOP/s | **no** |\n\n"
        "**The throughput target, explained.** A hand-written paragraph.\n\n"
        "A second one.\n\n"
        "### Benchmarks behind the notebooks' sizes\n\nA table written by hand.\n\n"
        "## Later\n\nkeep\n"
    )
    folder = tmp_path / "res"
    capstone_json(folder)  # a run of 07 alone, into the tutorials' section
    update(folder, md)
    text = md.read_text()
    assert "| matrix products: useful work | 665.3 TFLOP/s |  |" in text  # 00 kept
    assert "| 9 · shape: model TFLOP/s | 512.0 TFLOP/s | MFU 65% |" in text  # 07 new
    assert "| 9 · shape: model TFLOP/s | 400 TFLOP/s |" not in text  # 07 old, gone
    assert "Kept from the section as it was, with their targets and claims: 00-start-here." in (
        text
    )
    assert "It said of its run: Machine: NVIDIA H200 (140 GiB). Date: 2026-12-02." in text
    targets = text.split("### Targets")[1].split("###")[0]
    assert targets.index("| 00-start-here | a target of 00") < targets.index("| 07-capstone |")
    assert "| 07-capstone | final step, model TFLOP/s >= 500.0 TFLOP/s | 512.0 TFLOP/s | yes |" in (
        targets
    )
    assert "400 TFLOP/s | **no**" not in text
    assert "A hand-written paragraph.\n\nA second one." in targets
    assert "### Benchmarks behind the notebooks' sizes\n\nA table written by hand." in text
    assert text.endswith("## Later\n\nkeep\n")
    assert text.index("### 00-start-here") < text.index("### 07-capstone")


def test_each_earlier_run_of_a_kept_notebook_is_described_once_not_nested(
    tmp_path: Path,
) -> None:
    # What a run of 01 and 02 on an H100 wrote (2026-12-05, eighteenth session): the paragraph
    # for the kept 03 quoted the whole preamble, its own *Kept from* paragraph included, so it
    # named the seventeenth session's run of 01 and 02 as well, which the new run replaced.
    md = tmp_path / "RESULTS.md"
    part = "\n\n| figure | value | how |\n|---|---:|---|\n| a figure | 1 |  |\n\n"
    md.write_text(
        "# Measured results\n\n## Tutorials on one H200 (x)\n\n"
        "Machine: NVIDIA H200. Date: B.\n\nConditions: run B.\n\n"
        "Kept from the section as it was, with their targets and claims: 00-start-here, "
        "03-gpu-memory. It said of its run: Machine: NVIDIA H200. Date: A. Conditions: run A.\n\n"
        f"### 00-start-here (ran 1 s){part}### 03-gpu-memory (ran 1 s){part}"
        f"### 05-multi-gpu (ran 1 s){part}### 07-capstone (ran 1 s){part}"
    )
    folder = tmp_path / "res"
    capstone_json(folder)  # 07 again: 05 kept from run B, 00 and 03 from run A
    update(folder, md)
    text = md.read_text()
    assert text.count("Kept from the section as it was") == 2
    assert (
        "Kept from the section as it was, with their targets and claims: 05-multi-gpu. "
        "It said of its run: Machine: NVIDIA H200. Date: B. Conditions: run B.\n"
    ) in text
    assert (
        "Kept from the section as it was, with their targets and claims: 00-start-here, "
        "03-gpu-memory. It said of its run: Machine: NVIDIA H200. Date: A. Conditions: run A.\n"
    ) in text
    update(folder, md)  # once more: the same two runs, nothing nested
    again = md.read_text()
    assert again.count("Kept from the section as it was") == 2
    assert again.count("Conditions: run A.") == again.count("Conditions: run B.") == 1


def test_a_run_of_every_notebook_the_section_held_replaces_it_whole(tmp_path: Path) -> None:
    md = tmp_path / "RESULTS.md"
    md.write_text(
        "# Measured results\n\n## Tutorials on one H200 (x)\n\nMachine: old. Date: old.\n\n"
        "### 07-capstone (ran 300 s)\n\n| figure | value | how |\n|---|---:|---|\n"
        "| old row | 1 |  |\n\n### Targets\n\n| notebook | target | measured | met |\n"
        "|---|---|---:|---|\n| 07-capstone | old | 1 | **no** |\n"
    )
    folder = tmp_path / "res"
    capstone_json(folder)
    update(folder, md)
    text = md.read_text()
    assert "old" not in text.split("## Tutorials on one H200")[1]
    assert "Kept from" not in text


def test_a_hand_written_paragraph_above_the_parts_is_kept_marked_as_of_its_run(
    tmp_path: Path,
) -> None:
    # The 24gb section's note on why notebook 03 failed in one run and passed in the next sat
    # above the parts, where a re-run dropped it with the script's own paragraphs.
    md = tmp_path / "RESULTS.md"
    md.write_text(
        "# Measured results\n\n## Tutorials on one H200 (x)\n\n"
        "Written by `benchmarks/update_results.py` from the JSON files.\n\n"
        "03 failed in run 8 with an OOM; the limit is now measured.\n\n"
        "Machine: old. Date: old.\n\nConditions: beside another job.\n\n"
        "### 07-capstone (ran 300 s)\n\n| figure | value | how |\n|---|---:|---|\n"
        "| old row | 1 |  |\n"
    )
    folder = tmp_path / "res"
    capstone_json(folder)
    update(folder, md)
    update(folder, md)  # twice: marked once, kept once
    section = md.read_text().split("## Tutorials on one H200")[1]
    assert section.count("03 failed in run 8") == 1
    assert "\n\nKept, written by hand of an earlier run: 03 failed in run 8 with an OOM" in section
    assert section.index("Machine: NVIDIA H200") < section.index("Kept, written by hand")
    assert section.index("Kept, written by hand") < section.index("### 07-capstone")
    assert "Machine: old" not in section
    assert "beside another job" not in section
    assert "old row" not in section


def test_a_run_on_another_gpu_gets_a_section_of_its_own(tmp_path: Path) -> None:
    # 2026-12-05: the first H100 run would have replaced the H200's machine line and figures.
    md = tmp_path / "RESULTS.md"
    md.write_text("# Measured results\n\n## Capstone on one H200 (x)\n\nthe H200's run\n")
    capstone_json(tmp_path / "h100", gpu_name="NVIDIA H100 80GB HBM3")
    update(tmp_path / "h100", md, "--section", "Capstone")
    text = md.read_text()
    assert "## Capstone on one H200 (x)\n\nthe H200's run\n" in text
    h100 = text.split("## Capstone on one H100")[1]
    assert "NVIDIA H100 80GB HBM3 (" in h100
    assert "h200-notebooks" not in h100  # that folder holds the H200's executed copies


def test_the_section_names_the_gpu_not_its_memory_or_form() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from update_results import gpu_short_name

    def named(*names: str | None) -> str:
        return gpu_short_name([{"machine": {"gpu_name": n}} for n in names])

    assert named("NVIDIA H100 80GB HBM3") == "H100"
    assert named("NVIDIA H200", "NVIDIA H200") == "H200"
    assert named("NVIDIA A100-SXM4-80GB") == "A100"
    assert named("Tesla T4") == "T4"
    assert named("NVIDIA GeForce RTX 4090") == "GeForce RTX 4090"
    assert named(None) == "H200"  # a CPU run (tests only): the tutorials' own section
    with pytest.raises(ValueError, match="one GPU"):
        named("NVIDIA H100 80GB HBM3", "NVIDIA H200")


def test_the_tier_comes_from_the_runs_and_a_contrary_one_is_refused(tmp_path: Path) -> None:
    # 2026-12-05: a 16gb run of 07 on an H100, written without --tier, went under the full-size
    # section's title.
    md = tmp_path / "RESULTS.md"
    md.write_text("# Measured results\n")
    capstone_json(tmp_path / "16gb", {"tier": "16gb", "bf16": False, "emulated": True})
    update(tmp_path / "16gb", md, "--section", "Capstone")
    text = md.read_text()
    assert "## Capstone at the 16gb tier, emulated on one H200" in text
    assert "## Capstone on one H200" not in text
    full = {"tier": "80gb", "bf16": True, "emulated": False}  # picked from the GPU: full size
    capstone_json(tmp_path / "full", full)
    command = [sys.executable, str(SCRIPT), str(tmp_path / "full"), "--results-md", str(md)]
    done = subprocess.run([*command, "--tier", "16gb"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "--tier 16gb, but the runs emulated no tier" in done.stderr
    assert md.read_text() == text  # refused: nothing written
