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


#: Where the code the README names lives (not .venv or node_modules).
SOURCE_DIRS = ("jupyter_gpu", "tests", "benchmarks")


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
    commands = set(re.findall(r"`jupyter ([\w-]+)", README)) - {"lab"}
    assert commands, "the README names the tutorials' command"
    for command in commands:
        assert f"jupyter-{command}" in scripts, command  # jupyter runs jupyter-<name>
    for script in set(re.findall(r"\.ci/(\w+)", README)):
        assert (ROOT / ".ci" / script).is_file(), script
    for link in set(re.findall(r"\]\(((?!https?:)[^)#]+)\)", README)):
        assert (ROOT / link).exists(), link
    if "python -m build" in README:
        assert PYPROJECT["build-system"]["build-backend"] == "hatchling.build"
    name = PYPROJECT["project"]["name"].replace("-", "_")
    wheels = set(re.findall(r"dist/(\w+)-<version>-py3-none-any\.whl", README))
    assert wheels == {name}
    sources = [p.read_text() for d in SOURCE_DIRS for p in (ROOT / d).rglob("*.py")]
    for variable in set(re.findall(r"\b(JUPYTER_GPU_[A-Z_]+)", README)):
        assert any(variable in text for text in sources), f"nothing reads {variable}"
    if "UPDATE_SCREENSHOTS" in README:
        assert "UPDATE_SCREENSHOTS" in _source("ui-tests/tests/perf.spec.ts")


def test_the_quick_start_folder_is_the_one_ci_lab_serves() -> None:
    match = re.search(r"^folder=(\S+)", _source(".ci/lab"), re.M)
    assert match, ".ci/lab names the folder it serves"
    served = match.group(1).split("#")[0].strip()
    copies = set(re.findall(r"`([\w-]+)/gpu-tutorials/`", README))
    assert copies == {served}, copies  # where the README says the quick start copies
    assert f"/{served}/" in _source(".gitignore").splitlines()


def test_the_launcher_item_is_named_as_the_frontend_names_it() -> None:
    match = re.search(r"label: trans\.__\('([^']+)'\)", _source("labextension/src/tutorials.ts"))
    assert match, "tutorials.ts labels its launcher item"
    assert f"**{match.group(1)}** item" in README
    api = _source("labextension/src/tutorialsApi.ts")
    first = re.search(r"FIRST_NOTEBOOK = '([^']+)'", api)
    folder = re.search(r"TUTORIALS_FOLDER = '([^']+)'", api)
    assert first
    assert folder
    assert f"`{first.group(1)}`" in README
    assert f"`{folder.group(1)}/`" in README
    assert (ROOT / "notebooks" / first.group(1)).is_file()


def test_the_extras_it_names_exist_and_hold_what_it_says() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    groups = re.findall(r"(?:`|\.|whl|>)\[([a-z,]+)\]", README)  # `[lab]`, ".[lab,tutorials]"
    named = {e for group in groups for e in group.split(",")}
    assert {"lab", "torch", "tutorials"} <= named
    assert named <= set(extras), named - set(extras)
    # Where the README says what an extra holds ("`[tutorials]` torch plus ... (NumPy, ...)"),
    # it names every package of it.
    for extra, said in re.findall(r"`\[(\w+)\]` ([^;.]*)", README):
        packages = {re.split(r"[<>=\[ ]", r)[0] for r in extras[extra]}
        mentioned = {p for p in packages if p.lower() in said.lower()}
        assert mentioned == packages, (extra, packages - mentioned)


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


def _listed_items(sentence: str) -> list[str]:
    """The items of the list ``sentence`` ends with ("a, b (c, d), and e, which ..."): split at
    the commas outside parentheses; the item after "and" is the last, with what follows it."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(sentence):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(sentence[start:i].strip())
            start = i + 1
    parts.append(sentence[start:].strip())
    last = next(i for i, part in enumerate(parts) if part.startswith("and "))
    return [*parts[:last], ", ".join(parts[last:])[len("and ") :]]


def test_the_tutorial_list_names_every_notebook() -> None:
    # The README lists the notebooks' skills in order, one item each ("start here (...), torch.
    # compile (...), mixed precision, ..., and a capstone ..."): as many items as notebooks, and
    # each names a word of its notebook's file name (05-multi-gpu: "several GPUs").
    shipped = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    section = README.split("## Tutorial notebooks")[1].split("\n## ")[0]
    first_sentence = _flat(section).split(". ")[0]
    listed = first_sentence.split(": ", 1)[-1]  # the list, after its introduction
    items = _listed_items(listed)
    assert len(items) == len(shipped), (shipped, items)
    for stem, item in zip(shipped, items, strict=True):
        words = stem.split("-")[1:]
        assert any(w in item.lower() for w in words), (stem, item)


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


#: "the 8-GPU screenshots come from servers started with a synthetic past": a count of GPUs.
SEEDED_SCREENSHOTS = re.compile(r"\b(\d+)-GPU screenshots\b")


def test_the_screenshots_with_a_seeded_past_are_said_to_be() -> None:
    option = "simulated_seed_history_s"
    assert option in JupyterGpu.class_trait_names(config=True)
    # The paragraph that names the option beside the screenshots says which ones were seeded.
    (said,) = [p for p in README.split("\n\n") if "screenshot" in p and f"JupyterGpu.{option}" in p]
    (count,) = SEEDED_SCREENSHOTS.findall(_flat(said))
    assert "dashboard" in said
    dashboard = _source("ui-tests/tests/dashboard.spec.ts")
    assert f"`--JupyterGpu.{option}=${{SEEDED_S}}`" in dashboard
    assert "screenshot-dashboard.png" in dashboard
    # The many-GPU screenshot is taken on the perf project's server, which is seeded too.
    perf_server = _source("ui-tests/playwright.config.js").split("server(ports.perf")[1]
    assert f"'--JupyterGpu.{option}=" in perf_server.split("]")[0]
    assert f"'--JupyterGpu.simulated_devices={count}'" in perf_server.split("]")[0]
    assert f"screenshot-{count}-gpus.png" in _source("ui-tests/tests/perf.spec.ts")


def test_the_options_it_names_are_the_servers() -> None:
    config = README.split("## Configuration")[1].split("##")[0]
    traits = set(JupyterGpu.class_trait_names(config=True))
    named = set(re.findall(r"`(\w+)`", config.split("command line")[1].split("The frontend")[0]))
    named -= {"auto", "nvml", "simulated", "none"}  # the backend's values
    assert named <= traits, named - traits
    assert JupyterGpu(interval_s=0.5).interval_s == 0.5  # the example value is in bounds


def test_the_test_commands_do_what_it_says() -> None:
    section = README.split("## Run the tests")[1].split("\n## ")[0]
    # "bash .ci/test ... runs every check ... all the Python tests ... with pytest-xdist": the
    # slow ones too, on pytest-xdist workers that keep an xdist_group on one worker.
    assert "bash .ci/test" in section
    ci_test = _source(".ci/test").replace("\\\n", " ")  # a line continued is one line
    (pytest_line,) = re.findall(r"python -m pytest[^\n]*", ci_test)
    assert "--slow" in pytest_line
    assert "-n " in pytest_line
    assert "--dist loadgroup" in pytest_line
    assert "pytest-xdist" in section
    assert any(
        r.startswith("pytest-xdist") for r in PYPROJECT["project"]["optional-dependencies"]["test"]
    )
    # "python -m pytest ... leaves out the tests marked `slow`; `--slow` runs them too"
    assert re.search(r'addoption\(\s*"--slow"', _source("tests/conftest.py"))
    markers = {m.split(":")[0] for m in PYPROJECT["tool"]["pytest"]["ini_options"]["markers"]}
    for marker in re.findall(r"marked `(\w+)`", section):
        assert marker in markers, marker
    for option in re.findall(r"`python -m pytest (--[\w-]+)`", section):
        assert option == "--slow", option


# ------------------------------------------------------------------------------------ figures


#: The sections of RESULTS.md whose H200 runs the README quotes, newest first: the reworked
#: course's run of 00-02, and the tutorials section, for the notebooks that run did not reach (its
#: rows of 00-02 are kept from the run before the rework).
H200_SECTIONS = (
    "## Notebooks 00-02 of the reworked course on one H200",
    "## Tutorials on one H200",
)


def _section(heading: str) -> str:
    """The section of RESULTS.md under ``heading``, up to the next section."""
    return RESULTS.split(heading)[1].split("\n## ")[0]


def _targets(section: str) -> list[tuple[str, str, str]]:
    """(notebook, measured, met) of each row of ``section``'s targets table.

    A ratio's measured cell may hold its interval too: "5.09x (4.05-7.43x)".
    """
    table = section.split("### Targets")[1].split("\n\n")[1]
    rows = [line.split("|")[1:-1] for line in table.splitlines()[2:]]
    return [(cells[0].strip(), cells[2].strip(), cells[3].strip()) for cells in rows]


def _quoted_targets() -> list[tuple[str, str, str]]:
    """(section, measured, met) of the newest H200 run's targets of each notebook that has some:
    each notebook's rows from the first of ``H200_SECTIONS`` that holds them."""
    quoted, seen = [], set()
    for heading in H200_SECTIONS:
        section = _section(heading)
        rows = _targets(section)
        quoted += [(section, cell, met) for notebook, cell, met in rows if notebook not in seen]
        seen |= {notebook for notebook, _, _ in rows}
    return quoted


def _spans(section: str, measured: str) -> set[str]:
    """``measured`` with an interval its run gave it ("7.50x (7.44-7.53x)"), in its targets cell
    or in a figure row of the same section with that value whose *how* column opens with one."""
    if "(" in measured:
        return {measured}
    spans = set()
    for line in section.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) == 3 and cells[1] == measured:
            interval = re.match(r"(\d+(?:\.\d+)?-\d+(?:\.\d+)?x)(?:;|$)", cells[2])
            if interval:
                spans.add(f"{measured} ({interval.group(1)})")
    return spans


#: The date of a run the README quotes (checked against its section), and the round since.
H200_RUN = re.compile(r"\b[Oo]n \d{4}-\d\d-\d\d \((?:before|after) round 4\b")

#: A speed-up or a throughput: the tutorials' measured targets.
H200_FIGURE = re.compile(r"\b\d+(?:\.\d+)?(?:x| TFLOP/s)(?!\w)")

#: A ratio with its interval, "5.09x (4.05-7.43x)", as the targets table or the run gives it.
H200_SPAN = re.compile(r"\b\d+(?:\.\d+)?x \(\d+(?:\.\d+)?-\d+(?:\.\d+)?x\)")


def test_the_h200_figures_are_the_measured_targets() -> None:
    quoted = H200_FIGURE.findall(README)
    assert quoted, "the README quotes the tutorials' measured targets"
    targets = _quoted_targets()
    spans = set(H200_SPAN.findall(_flat(README)))
    # Each target's median once, with an interval its run measured where the README gives one,
    # and no other figure.
    cells = []
    for section, measured, _ in targets:
        given = {span for span in spans if span.split(" (")[0] == measured.split(" (")[0]}
        assert len(given) <= 1, given
        assert given <= _spans(section, measured), f"{given}: not an interval its run measured"
        cells.append(next(iter(given), measured))
    assert not spans - set(cells), f"{spans - set(cells)}: not a measured target"
    figures = [f for cell in cells for f in H200_FIGURE.findall(cell)]  # with intervals' ends
    assert sorted(quoted) == sorted(figures), "quote each measured target once, and no other"
    if "every target" in README:
        assert {met for _, _, met in targets} == {"yes"}
    # A target not met is said so beside its figure.
    for cell, (_, _, met) in zip(cells, targets, strict=True):
        said = re.escape(cell) + r"[^.]*not (?:shown to be )?met"
        if met != "yes":
            assert re.search(said, _flat(README)), cell
    # Each run's date, as its section gives it: the course has changed since, and says so.
    for heading in H200_SECTIONS:
        (date,) = re.findall(r"^Machine: .*Date: (\d{4}-\d\d-\d\d)\.$", _section(heading), re.M)
        assert re.search(rf"\b[Oo]n {date} \(after round 4\b", _flat(README)), date


STATUS_EXAMPLE = re.compile(r"GPU \d+: \d+% · [\d.]+/\d+ GiB")


def test_the_status_bar_example_is_the_formatters_tested_output() -> None:
    examples = set(STATUS_EXAMPLE.findall(README))
    assert examples, "the README shows the status bar's text"
    tested = set(STATUS_EXAMPLE.findall(_source("labextension/src/__tests__/format.spec.ts")))
    assert examples <= tested, examples - tested


#: "5 min live, or 1 h and 24 h": a chart range.
RANGE = re.compile(r"\b(\d+) (min|h)\b")


def test_the_dashboards_ranges_are_its_own() -> None:
    dashboard = next(p for p in README.split("\n\n") if "**GPU dashboard**" in p)
    said = {int(n) * (60 if unit == "min" else 3600) for n, unit in RANGE.findall(dashboard)}
    series = _source("labextension/src/dashboard/series.ts")
    ranges = re.search(r"export const RANGES\b[^=]*= \{([^}]*)\}", series)
    assert ranges, "series.ts declares the ranges a person can pick, in seconds"
    own = {int(s) for s in re.findall(r": (\d+)", ranges.group(1))}
    assert said
    assert said == own, (said, own)


EIGHT_GPUS = re.compile(r"\*\*(\d+) GPUs in a narrow sidebar")


def test_the_many_gpu_screenshot_is_taken_with_as_many() -> None:
    (count,) = EIGHT_GPUS.findall(README)
    perf = _source("ui-tests/tests/perf.spec.ts")
    assert f"devices: {count}," in perf
    assert f"screenshot-{count}-gpus.png" in perf
    assert f"screenshot-{count}-gpus.png" in README


#: "about 21 ms per GPU per read, measured on an H200 on 2026-11-30": the cost, the GPU, the day.
PCIE_READ = re.compile(
    r"about\s+(\d+)\s+ms\s+per\s+GPU\s+per\s+read,\s+measured\s+on\s+an\s+(H\d+)\s+on\s+"
    r"(\d{4}-\d\d-\d\d)"
)


def test_the_pcie_read_cost_is_the_measured_one() -> None:
    ((said, gpu, date),) = PCIE_READ.findall(README)
    # The run that measured it: "... on one H200 (driver ...), 2026-11-30: the `nvml` backend's
    # reads (medians, µs per call):", its table the next block.
    intro = re.search(
        rf"on one {gpu} \(driver [\d.]+\), {date}: the\s+`nvml` backend's reads[^\n]*:\n", RESULTS
    )
    assert intro, f"RESULTS.md has no NVML reads measured on an {gpu} on {date}"
    table = RESULTS[intro.end() :].lstrip("\n").split("\n\n")[0]
    row = re.search(r"^\| nvmlDeviceGetPcieThroughput\(TX\) \[slow\] \| ([\d,.]+) \|$", table, re.M)
    assert row, "that run's table of NVML calls (µs) has the PCIe read"
    measured_ms = float(row.group(1).replace(",", "")) / 1000
    assert int(said) == round(measured_ms)


ADDRESS = re.compile(r"http://127\.0\.0\.1:(\d+)")


def test_the_address_is_where_ci_lab_serves() -> None:
    from jupyter_server.serverapp import DEFAULT_JUPYTER_SERVER_PORT

    (port,) = set(ADDRESS.findall(README))
    assert int(port) == DEFAULT_JUPYTER_SERVER_PORT
    assert "--port" not in _source(".ci/lab")  # .ci/lab keeps Jupyter's default
    assert '--ip="${JUPYTER_IP:-127.0.0.1}"' in _source(".ci/lab")


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
    H200_SPAN,  # before its figures: they leave the interval's low end behind
    H200_FIGURE,
    H200_RUN,
    STATUS_EXAMPLE,
    RANGE,
    EIGHT_GPUS,
    SEEDED_SCREENSHOTS,
    PCIE_READ,
    ADDRESS,
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
    text = _flat(README)  # a figure broken over two lines is still one figure
    for pattern in CHECKED + NOT_FIGURES:
        text = pattern.sub(" ", text)
    left = [m.group(0) for m in re.finditer(r"\d+(?:[.,]\d+)*", text)]
    assert left == [], (
        f"the README states {left}: check each in tests/unit/test_readme.py, or say it without "
        "a figure"
    )
