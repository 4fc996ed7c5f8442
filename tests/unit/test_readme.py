"""Every name and figure the README states, checked against what it names.

A figure the README gives must be one of those checked here (the last test fails on any other
number), and each is checked against its source: the icon file, the measured targets in
benchmarks/RESULTS.md, the frontend's own tests and constants, the package's metadata and
options. How long the tests or the build take is not stated at all: it depends on the machine,
and ``.ci/test`` and ``.ci/setup`` print what they took each time they run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from jupyter_gpu.config import JupyterGpu

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
RESULTS = (ROOT / "benchmarks" / "RESULTS.md").read_text()


def _source(path: str) -> str:
    return (ROOT / path).read_text()


def _flat(text: str) -> str:
    """``text`` with every run of white space (line breaks included) as one space."""
    return " ".join(text.split())


# ------------------------------------------------------------------------------------- names


def test_the_icon_is_named_for_what_the_icon_file_draws() -> None:
    match = re.search(
        r"The monitor's icon: an? ([a-z ]+?) seen", _source("labextension/src/icon.ts")
    )
    assert match, "icon.ts says what its icon draws in its first comment"
    drawn = match.group(1).replace(" ", "-")  # "graphics card" -> "graphics-card icon"
    named = re.findall(r"the ([\w-]+) icon", README)
    assert named, "the README says which icon opens the monitor"
    assert set(named) == {drawn}
    assert "chip" not in README


def test_the_commands_and_files_it_names_exist() -> None:
    scripts = PYPROJECT["project"]["scripts"]
    assert "jupyter gpu-tutorials" in README
    assert "jupyter-gpu-tutorials" in scripts  # jupyter runs jupyter-<name>
    for script in set(re.findall(r"\.ci/(\w+)", README)):
        assert (ROOT / ".ci" / script).is_file(), script
    for link in set(re.findall(r"\]\(((?!https?:)[^)#]+)\)", README)):
        assert (ROOT / link).exists(), link
    assert "python -m build --wheel" in README
    assert PYPROJECT["build-system"]["build-backend"] == "hatchling.build"
    name = PYPROJECT["project"]["name"].replace("-", "_")
    assert f"dist/{name}-<version>-py3-none-any.whl" in README
    for variable, where in (("JUPYTER_GPU_SMOKE", "jupyter_gpu"), ("JUPYTER_GPU_OUT", "tests/gpu")):
        assert variable in README
        assert any(variable in p.read_text() for p in (ROOT / where).rglob("*.py")), variable
    assert "UPDATE_SCREENSHOTS" in _source("ui-tests/tests/perf.spec.ts")


def test_the_quick_start_folder_is_the_one_ci_lab_serves() -> None:
    assert "`lab-work/gpu-tutorials/`" in README
    assert "folder=lab-work" in _source(".ci/lab")
    assert "/lab-work/" in _source(".gitignore").splitlines()


def test_the_launcher_item_is_named_as_the_frontend_names_it() -> None:
    assert "**GPU tutorials** item" in README
    assert "label: trans.__('GPU tutorials')" in _source("labextension/src/tutorials.ts")
    api = _source("labextension/src/tutorialsApi.ts")
    assert "FIRST_NOTEBOOK = '00-start-here.ipynb'" in api
    assert "TUTORIALS_FOLDER = 'gpu-tutorials'" in api
    assert (ROOT / "notebooks" / "00-start-here.ipynb").is_file()


def test_the_extras_it_names_exist_and_hold_what_it_says() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    groups = re.findall(r"(?:`|\.|whl|>)\[([a-z,]+)\]", README)  # `[lab]`, ".[lab,tutorials]"
    named = {e for group in groups for e in group.split(",")}
    assert {"lab", "torch", "tutorials"} <= named
    assert named <= set(extras), named - set(extras)
    tutorials = {re.split(r"[<>=\[ ]", r)[0] for r in extras["tutorials"]}
    assert tutorials == {"torch", "numpy", "scikit-learn", "tqdm", "torchao"}
    assert "torch plus what the notebooks use (NumPy, scikit-learn, tqdm, and torchao" in README


def test_the_magics_it_lists_are_the_ones_the_extension_loads() -> None:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jupyter_gpu")
    try:
        magics = ip.magics_manager.lsmagic()
        for kind, name in re.findall(r"(%%?)(\w+)", README.split("## IPython magics")[1][:1200]):
            table = magics["cell" if kind == "%%" else "line"]
            if name in ("load_ext", "pip"):
                continue
            assert name in table, f"{kind}{name}"
    finally:
        # A loaded extension keeps its filters on torch's log handlers for the rest of the
        # process, where later tests load and unload their own.
        ip.run_line_magic("unload_ext", "jupyter_gpu")


# Each tutorial notebook and how the README's list of them names it.
TUTORIALS = {
    "00-start-here": "start here (the monitor, `%gpu`)",
    "01-torch-compile": ", torch.compile,",
    "02-mixed-precision": "mixed precision",
    "03-gpu-memory": "GPU memory",
    "04-profiling": "profiling an input pipeline",
    "05-multi-gpu": "several GPUs (DDP, FSDP, NCCL with `%%torchrun`)",
    "06-compile-cache": "the torch.compile cache (where it lives,",
    "07-capstone": "a capstone",
}


def test_the_tutorial_list_names_every_notebook() -> None:
    shipped = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert shipped == set(TUTORIALS), "a notebook to add to (or drop from) the README's list"
    section = README.split("## Tutorial notebooks")[1].split("\n## ")[0]
    listed = _flat(section.split(". They need no download")[0])
    missing = [name for name, phrase in TUTORIALS.items() if phrase not in listed]
    assert missing == []


def test_the_status_bar_item_is_said_to_open_its_menu() -> None:
    assert "whose click opens a menu: the monitor or the dashboard" in _flat(README)
    assert "that opens it" not in README
    index = _source("labextension/src/index.ts")
    menu = re.search(r"const menu = new Menu\(.*?\n(.*?)new GpuStatusItem\(", index, re.S)
    assert menu, "index.ts builds the status bar item's menu"
    items = re.findall(r"menu\.addItem\(\{ command: (\w+) \}\)", menu.group(1))
    assert items == ["OPEN_COMMAND", "DASHBOARD_COMMAND"]
    assert "(x, y) => menu.open(x, y)" in index  # a click opens the menu
    assert "const OPEN_COMMAND = 'jupyter-gpu:open';" in index  # the monitor (sidebar)
    assert "const DASHBOARD_COMMAND = 'jupyter-gpu:dashboard';" in index


def test_the_screenshots_with_a_seeded_past_are_said_to_be() -> None:
    option = "simulated_seed_history_s"
    assert (
        "The dashboard's and the 8-GPU screenshots come from servers started with a synthetic "
        f"past already in their history (`--JupyterGpu.{option}`)" in _flat(README)
    )
    assert option in JupyterGpu.class_trait_names(config=True)
    dashboard = _source("ui-tests/tests/dashboard.spec.ts")
    assert f"`--JupyterGpu.{option}=${{SEEDED_S}}`" in dashboard
    assert "screenshot-dashboard.png" in dashboard
    # The 8-GPU screenshot is taken on the perf project's server, which is seeded too.
    perf_server = _source("ui-tests/playwright.config.js").split("server(ports.perf")[1]
    assert f"'--JupyterGpu.{option}=" in perf_server.split("]")[0]
    assert "'--JupyterGpu.simulated_devices=8'" in perf_server.split("]")[0]
    assert "screenshot-8-gpus.png" in _source("ui-tests/tests/perf.spec.ts")


def test_the_options_it_names_are_the_servers() -> None:
    config = README.split("## Configuration")[1].split("##")[0]
    traits = set(JupyterGpu.class_trait_names(config=True))
    named = set(re.findall(r"`(\w+)`", config.split("command line")[1].split("The frontend")[0]))
    named -= {"auto", "nvml", "simulated", "none"}  # the backend's values
    assert named <= traits, named - traits
    assert JupyterGpu(interval_s=0.5).interval_s == 0.5  # the example value is in bounds


# ------------------------------------------------------------------------------------ figures


def _targets() -> list[tuple[str, str]]:
    """(measured, met) of each row of the H200 tutorials' targets table in RESULTS.md."""
    section = RESULTS.split("## Tutorials on one H200")[1].split("\n## ")[0]
    table = section.split("### Targets")[1].split("\n\n")[1]
    rows = [line.split("|")[1:-1] for line in table.splitlines()[2:]]
    return [(cells[2].strip(), cells[3].strip()) for cells in rows]


H200_SENTENCE = re.compile(r"On one H200\s+they met every target: (.*?)\. The executed", re.S)
H200_FIGURE = re.compile(r"\d+(?:\.\d+)?(?:x| TFLOP/s)")


def test_the_h200_figures_are_the_measured_targets() -> None:
    match = H200_SENTENCE.search(README)
    assert match, "the README quotes the tutorials' measured targets"
    quoted = H200_FIGURE.findall(match.group(1))
    targets = _targets()
    assert all(met == "yes" for _, met in targets)  # "they met every target"
    assert sorted(quoted) == sorted(measured for measured, _ in targets)


def test_the_status_bar_example_is_the_formatters_tested_output() -> None:
    example = "GPU 0: 87% · 31.2/140 GiB"
    assert f"`{example}`" in README
    assert f"'{example}'" in _source("labextension/src/__tests__/format.spec.ts")


def test_the_dashboards_ranges_are_its_own() -> None:
    assert "5 min live, or 1 h and 24 h" in README
    series = _source("labextension/src/dashboard/series.ts")
    for name, seconds in (("5m", 300), ("1h", 3600), ("24h", 86400)):
        assert f"'{name}': {seconds}" in series


def test_the_eight_gpu_screenshot_is_taken_with_eight() -> None:
    assert "**8 GPUs in a narrow sidebar" in README
    perf = _source("ui-tests/tests/perf.spec.ts")
    assert "devices: 8," in perf
    assert "screenshot-8-gpus.png" in perf


def test_the_pcie_read_cost_is_the_measured_one() -> None:
    assert "about 21 ms per GPU per read" in README
    assert "`nvmlDeviceGetPcieThroughput` for TX and RX, about 21 ms each on this GPU" in RESULTS


def test_the_address_is_where_ci_lab_serves() -> None:
    from jupyter_server.serverapp import DEFAULT_JUPYTER_SERVER_PORT

    assert "http://127.0.0.1:8888" in README
    assert '--ip="${JUPYTER_IP:-127.0.0.1}"' in _source(".ci/lab")
    assert "--port" not in _source(".ci/lab")
    assert DEFAULT_JUPYTER_SERVER_PORT == 8888


def test_no_duration_of_the_tests_or_the_build_is_stated() -> None:
    # They depend on the machine and its load: the scripts print them instead.
    for text, where in ((README, "README.md"), (_source(".ci/setup"), ".ci/setup")):
        assert not re.search(r"\d+\s*(?:minutes?|seconds?)\b|\ba minute\b", text), where
    assert re.search(
        r'echo "all checks passed in \$\(\(SECONDS - start\)\) s"', _source(".ci/test")
    )
    assert "done in %d s" in _source(".ci/setup")


# Figures checked above, and numbers that are names or inputs rather than figures.
CHECKED = [
    H200_SENTENCE,
    re.compile(r"GPU 0: 87% · 31\.2/140 GiB"),
    re.compile(r"5 min live, or 1 h and 24 h"),
    re.compile(r"\*\*8 GPUs in a narrow sidebar"),
    re.compile(r"the 8-GPU screenshots come from servers"),
    re.compile(r"about 21 ms per GPU per read"),
    re.compile(r"http://127\.0\.0\.1:8888"),
    re.compile(r"--JupyterGpu\.interval_s=0\.5"),
]
NOT_FIGURES = [
    re.compile(r"\b[A-Za-z_][\w-]*\d\w*"),  # H200, bf16, fp32, py3, v1, screenshot-8-gpus
    re.compile(r"\b\d+-[a-z][\w-]*\.ipynb"),  # 00-start-here.ipynb
    re.compile(r"\b[A-Z_]+=1\b"),  # JUPYTER_GPU_SMOKE=1: a switch
    re.compile(r"%%torchrun -n 2 -o result\s+# the cell on 2 ranks"),  # an example input
    re.compile(r"GPU 0\b"),  # a device index in prose
]


def test_every_figure_in_the_readme_is_one_checked_here() -> None:
    text = README
    for pattern in CHECKED + NOT_FIGURES:
        text = pattern.sub(" ", text)
    left = [m.group(0) for m in re.finditer(r"\d+(?:[.,]\d+)*", text)]
    assert left == [], (
        f"the README states {left}: check each in tests/unit/test_readme.py, or say it without "
        "a figure"
    )
