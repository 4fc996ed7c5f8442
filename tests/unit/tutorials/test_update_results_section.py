"""benchmarks/update_results.py --section: one notebook's run in a section of its own."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "benchmarks" / "update_results.py"


def capstone_json(folder: Path, tier: dict | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    machine = {
        "mode": "gpu",
        "device": "cuda",
        "gpu_name": "NVIDIA H200",
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
    assert "| 9 · shape: model TFLOP/s | 512 TFLOP/s | MFU 65% |" in full
    assert "| 07-capstone | final step, model TFLOP/s >= 500 TFLOP/s | 512 TFLOP/s | yes |" in full
    assert "h200-notebooks/" not in full  # the HTML copies are the tutorials' run's


def test_conditions_are_written_below_the_machine(tmp_path: Path) -> None:
    md = tmp_path / "RESULTS.md"
    capstone_json(tmp_path / "full")
    update(tmp_path / "full", md, "--section", "Capstone", "--conditions", "beside the suite")
    text = md.read_text()
    machine = text.index("Machine:")
    assert machine < text.index("\n\nConditions: beside the suite\n\n") < text.index("### 07")
