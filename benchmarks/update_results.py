"""Write the tutorials' measured figures into benchmarks/RESULTS.md.

Reads the ``<notebook>.json`` files that the notebooks save (``jupyter_gpu.tutorials.results``)
when ``JUPYTER_GPU_RESULTS_DIR`` is set, and replaces the body of the section
``## Tutorials on one H200 ...`` (or the GPU the runs had: ``on one H100``) with: the machine,
the date, each notebook's figures, and the target checks. Nothing is typed in by hand; run it
after the notebooks ran at full size:

    python benchmarks/update_results.py RESULTS_DIR [--results-md benchmarks/RESULTS.md]

If the folder also holds ``gpt_step.json`` or ``input_pipeline.json`` (what
``benchmarks/gpt_step.py`` and ``benchmarks/input_pipeline.py`` write to ``$OUT``), their tables
are added under *Benchmarks behind the notebooks' sizes*.

``--conditions "..."`` adds a line saying how the run was made when the GPU was not its alone
(another job beside it), so that nobody reads its figures as a clean run's.

``--section Capstone`` writes ``## Capstone on one H200`` instead (appended the first time): a run
of notebook 07 alone then leaves the tutorials' section, and its figures, as they are.

A run of some notebooks keeps what the section held of the others: their tables, and their rows
of *Targets* and *Claims*, with a line saying which are kept and from which run. Text it did not
write (a paragraph under *Targets*, a ``###`` part of its own) is kept too; a hand-written
paragraph above the first part is kept marked as of an earlier run (it may speak of that run:
delete it by hand once it no longer holds). On 2026-12-02 a replaced section took with it the
hand-written explanation of notebook 01's target, which the notebook cites; on 2026-12-05 a run
of 03 and 04 would have dropped 00-02 and 05.

Smoke-mode and CPU results are refused (they would say nothing about a GPU) unless
``--allow-any-mode`` is given (tests use it, writing to a scratch copy).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a source tree without installing the package

from jupyter_gpu.tutorials.results import Check, format_value  # noqa: E402 (after the path set-up)

#: The GPU a section is titled with when the runs name none (tests' CPU runs).
DEFAULT_GPU = "H200"
SECTION = f"## Tutorials on one {DEFAULT_GPU}"
#: The GPU whose full-size run's executed copies benchmarks/h200-notebooks/ holds.
COPIES_GPU = "H200"
#: Words of a GPU's name that are its memory or form factor, not its model.
_NOT_THE_MODEL = re.compile(r"^(NVIDIA|Tesla|\d+GB|HBM\d*e?|PCIe|SXM\d*|NVL)$", re.IGNORECASE)
NOTEBOOKS = (
    "00-start-here",
    "01-torch-compile",
    "02-mixed-precision",
    "03-gpu-memory",
    "04-profiling",
    "05-multi-gpu",
    "06-compile-cache",
    "07-capstone",
)


def load(results_dir: Path) -> list[dict[str, Any]]:
    runs = []
    for path in sorted(results_dir.glob("*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "notebook" in data and "figures" in data:
            runs.append(data)
    order = {name: i for i, name in enumerate(NOTEBOOKS)}
    return sorted(runs, key=lambda r: (order.get(r["notebook"], 99), r["notebook"]))


def machine_line(run: dict[str, Any]) -> str:
    m = run["machine"]
    if m.get("gpu_name"):
        gpu = f"{m['gpu_name']} ({(m.get('gpu_memory_bytes') or 0) / 2**30:.0f} GiB)"
        cuda = f", CUDA {m.get('cuda_version')}"
    else:
        gpu, cuda = "no GPU (CPU only)", ""
    tier = run.get("tier") or {}
    sizes = f"{m['mode']} sizes"
    if tier.get("tier"):
        how = "emulated" if tier.get("emulated") else "picked from the GPU"
        precision = "bf16" if tier.get("bf16") else "fp16 + GradScaler"
        sizes = f"tier {tier['tier']} ({how}; {precision})"
    return (
        f"{gpu}, torch {m['torch_version']}{cuda}, Python {m['python_version']}, "
        f"{m['cpu_count']} CPUs; {sizes}"
    )


def how_run(tier: str | None) -> str:
    """How the notebooks ran: at full size, or at a tier emulated on a larger GPU."""
    if not tier:
        return "at full size"
    precision = "" if tier != "16gb" else ", and the no-bf16 path (fp16 + GradScaler) as on a T4"
    return (
        f"at the {tier} tier (torch's allocator capped with "
        f"`set_per_process_memory_fraction`{precision})"
    )


def render(runs: list[dict[str, Any]], tier: str | None = None, *, copies: bool = True) -> str:
    if not runs:
        return "(no results found)\n"
    machines = sorted({machine_line(r) for r in runs})
    dates = sorted({r["date"].split(" ")[0] for r in runs})
    # The HTML copies in h200-notebooks/ are of the full-size run of the tutorials' section only.
    html = (
        ""
        if tier or not copies
        else " The executed notebooks of the same run, as HTML: [h200-notebooks/](h200-notebooks/)"
        " (copied from the runner's archive)."
    )
    lines = [
        "Written by `benchmarks/update_results.py` from the JSON files the notebooks saved "
        "while `tests/gpu/run_notebooks_gpu.py` executed them with nbclient "
        f"{how_run(tier)}. Each figure is the notebook's own measurement (steady-state medians "
        "after warm-up, CUDA synchronised; the *how* column says how many runs)." + html,
        "",
        f"Machine: {'; '.join(machines)}. Date: {', '.join(dates)}.",
        "",
    ]
    checks: list[tuple[str, dict[str, Any]]] = []
    claims: list[tuple[str, dict[str, Any]]] = []
    for run in runs:
        lines += [
            f"### {run['notebook']} (ran {run.get('elapsed_s', 0):.0f} s)",
            "",
            "| figure | value | how |",
            "|---|---:|---|",
        ]
        for figure in run["figures"]:
            detail = figure.get("detail", "").replace("|", "/")
            value = format_value(figure["value"], figure["unit"])
            lines.append(f"| {figure['label']} | {value} | {detail} |")
        lines.append("")
        checks += [(run["notebook"], c) for c in run.get("checks", [])]
        claims += [(run["notebook"], c) for c in run.get("claims", [])]
    if checks:
        lines += ["### Targets", "", "| notebook | target | measured | met |", "|---|---|---:|---|"]
        for notebook, c in checks:
            met = {True: "yes", False: "**no**", None: "n/a"}[c["met"]]
            target = format_value(c["target"], c["unit"])
            value = Check(**c).measured()  # with its interval, where it has one
            lines.append(f"| {notebook} | {c['label']} >= {target} | {value} | {met} |")
        lines.append("")
    lines += render_claims(claims)
    return "\n".join(lines)


def render_claims(claims: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """How many of each notebook's claims held, and each one that did not, with its figures.

    A claim checks a sentence the notebook teaches where it makes it
    (``jupyter_gpu/tutorials/claims.py``); one that failed in a judged run (full size, its GPU)
    means the notebook's text is not true there.
    """
    if not claims:
        return []
    lines = ["### Claims", "", "| notebook | held | did not hold |", "|---|---:|---|"]
    by_notebook: dict[str, list[dict[str, Any]]] = {}
    for notebook, c in claims:
        by_notebook.setdefault(notebook, []).append(c)
    for notebook, made in by_notebook.items():
        failed = [c for c in made if not c["holds"]]
        listed = "; ".join(
            f"{c['statement']} (measured: {c['measured']})"
            + ("" if c.get("judged", True) else " [not judged here]")
            for c in failed
        ).replace("|", "/")
        lines.append(f"| {notebook} | {len(made) - len(failed)} of {len(made)} | {listed} |")
    lines.append("")
    return lines


def render_benchmarks(results_dir: Path) -> list[str]:
    """Tables from gpt_step.json and input_pipeline.json, when the folder has them."""
    lines: list[str] = []
    gpt_path, pipe_path = results_dir / "gpt_step.json", results_dir / "input_pipeline.json"
    if not gpt_path.exists() and not pipe_path.exists():
        return lines
    lines += ["", "### Benchmarks behind the notebooks' sizes", ""]
    if gpt_path.exists():
        g = json.loads(gpt_path.read_text())
        lines += [
            f"`benchmarks/gpt_step.py` on {g['gpu']}, torch {g['torch']}, {g['date']}: the "
            "tutorial GPT's training step (model FLOPs = 6 N + 12 L d T per token).",
            "",
            "| size | config | ms/step | interval | tokens/s | TFLOP/s | peak GiB | runs |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in g["gpt"]:
            if "error" in r:
                lines.append(
                    f"| {r['size']} | {r['config']} | failed: {r['error'][:80]} | | | | | |"
                )
                continue
            peak = "" if r.get("peak_gib") is None else f"{r['peak_gib']:.1f}"
            low, high = r.get("step_ms_interval") or (None, None)
            span = f"{low:.1f}-{high:.1f}" if low is not None else ""
            lines.append(
                f"| {r['size']} | {r['config']} | {r['step_ms']:.1f} | {span} | "
                f"{r['tokens_per_s']:,.0f} | {r['tflops']:.1f} | {peak} | {r['runs']} |"
            )
        if g.get("mlp"):
            lines += ["", "| launch-bound MLP | layers | ms/step | runs |", "|---|---:|---:|---:|"]
            for r in g["mlp"]:
                if "error" not in r:
                    depth = r.get("depth", "")
                    lines.append(f"| {r['config']} | {depth} | {r['step_ms']:.3f} | {r['runs']} |")
        if g.get("checks"):
            lines += [
                "",
                "| size | figure | measured | interval | target | met |",
                "|---|---|---:|---:|---:|---|",
            ]
            for c in g["checks"]:
                # Files from before 2026-12-05 judged medians and carry no interval.
                low, high = c.get("interval") or (None, None)
                span = f"{low:.2f}-{high:.2f}" if low is not None else "none (medians only)"
                met = {True: "yes", False: "**no**"}.get(c.get("met"), "not judged")
                lines.append(
                    f"| {c['size']} | {c['figure']} | {c['value']:.2f} | {span} | "
                    f"{c['target']} | {met} |"
                )
        lines.append("")
    if pipe_path.exists():
        p = json.loads(pipe_path.read_text())
        low, high = p.get("fixed_over_slow_interval") or (None, None)
        span = f" ({low:.2f}-{high:.2f}x, {p['rounds']} rounds)" if low is not None else ""
        lines += [
            f"`benchmarks/input_pipeline.py` on {p['gpu']}, torch {p['torch']}, {p['date']}, "
            f"{p['cpus']} CPUs: fixed / slow = {p['fixed_over_slow']:.2f}x{span} (target "
            f">= {p['target']}x).",
            "",
            "| pipeline | workers | pin_memory | images/s |",
            "|---|---:|---|---:|",
        ]
        for r in p["rows"]:
            lines.append(
                f"| {r['pipeline']} | {r['workers']} | {r['pin_memory']} | "
                f"{r['images_per_s']:,.0f} |"
            )
        lines.append("")
    return lines


def gpu_short_name(runs: list[dict[str, Any]]) -> str:
    """The GPU the runs ran on, as a section's title names it: "NVIDIA H100 80GB HBM3" is H100.

    A section holds one GPU's figures: on 2026-12-05 the first H100 run would have been merged
    into the H200's section, machine line and all, had the title not named its GPU.

    Raises:
        ValueError: the runs name more than one GPU.
    """
    names = {r["machine"].get("gpu_name") for r in runs} - {None, ""}
    if len(names) > 1:
        raise ValueError(f"one section, one GPU: these runs name {sorted(names)}")
    if not names:
        return DEFAULT_GPU
    words = re.split(r"[\s-]+", names.pop().strip())
    return " ".join(w for w in words if not _NOT_THE_MODEL.match(w)) or DEFAULT_GPU


def emulated_tier(runs: list[dict[str, Any]], given: str | None = None) -> str | None:
    """The tier the runs emulated (None: full size on their GPU), from their own JSON.

    ``--tier`` was once the only source: on 2026-12-05 (seventeenth session) a 16gb run of 07 on
    an H100, written without it, went under *Capstone on one H100* as if at full size, its
    machine line saying "tier 16gb". ``given`` (``--tier``) must agree with the runs.

    Raises:
        ValueError: the runs emulated different tiers, or not the one given.
    """
    tiers = {
        (r.get("tier") or {}).get("tier") if (r.get("tier") or {}).get("emulated") else None
        for r in runs
    }
    if len(tiers) > 1:
        raise ValueError(f"one section, one tier: these runs emulated {sorted(map(str, tiers))}")
    tier = tiers.pop()
    if given is not None and given != tier and any(r.get("tier") for r in runs):
        raise ValueError(f"--tier {given}, but the runs emulated {tier or 'no tier'}")
    return given if tier is None else tier


def section_title(tier: str | None, name: str | None = None, gpu: str = DEFAULT_GPU) -> str:
    """The heading of the section: full size, or a tier emulated on the same GPU.

    ``name`` (e.g. ``Capstone``) heads a section of its own instead of the tutorials' one, so
    that a run of one notebook leaves the other notebooks' figures where they are. ``gpu``
    (:func:`gpu_short_name`) is the GPU the runs had.
    """
    where = f"on one {gpu}" if not tier else f"at the {tier} tier, emulated on one {gpu}"
    return f"## {name or 'Tutorials'} {where}"


def _section_span(lines: list[str], title: str) -> tuple[int, int] | None:
    """The section's heading line and the line of the next ``## `` heading (None: no section)."""
    start = next((i for i, line in enumerate(lines) if line.startswith(title)), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return start, end


def section_body(markdown: str, title: str) -> str | None:
    """The text of the section under ``title``, up to the next ``## `` heading (None: none)."""
    lines = markdown.splitlines(keepends=True)
    span = _section_span(lines, title)
    return None if span is None else "".join(lines[span[0] + 1 : span[1]])


def replace_section(markdown: str, body: str, title: str = SECTION) -> str:
    """Replace the text between the section's heading and the next ``## `` heading."""
    lines = markdown.splitlines(keepends=True)
    span = _section_span(lines, title)
    if span is None:
        return (
            markdown.rstrip("\n")
            + f"\n\n{title} (`update_results.py` from the executed notebooks)\n\n{body}"
        )
    start, end = span
    tail = "".join(lines[end:])
    return "".join(lines[: start + 1]) + "\n" + body + ("\n" + tail if tail else "")


def _parts(body: str) -> tuple[str, list[tuple[str, str]]]:
    """A section's text before its first ``### `` heading, and each ``### `` part: heading, text."""
    preamble: list[str] = []
    parts: list[list[str]] = []
    for line in body.splitlines(keepends=True):
        if line.startswith("### "):
            parts.append([line, ""])
        elif parts:
            parts[-1][1] += line
        else:
            preamble.append(line)
    return "".join(preamble), [(h, t) for h, t in parts]


def _notebook_of(heading: str) -> str | None:
    """``03-gpu-memory`` from ``### 03-gpu-memory (ran 39 s)``; ``None`` for any other part."""
    name = heading[4:].split(" (")[0].strip()
    return name if name in NOTEBOOKS else None


def _rows_and_text(text: str) -> tuple[list[str], str]:
    """A *Targets* or *Claims* part: its table's data rows, and any other text (hand-written)."""
    rows: list[str] = []
    other: list[str] = []
    for line in text.splitlines(keepends=True):
        cells = line.strip()
        if cells.startswith(("| notebook |", "|---")):
            continue
        if cells.startswith("|"):
            rows.append(line if line.endswith("\n") else line + "\n")
        else:
            other.append(line)
    prose = re.sub(r"\n{3,}", "\n\n", "".join(other)).strip("\n")
    return rows, prose


def _row_notebook(row: str) -> str:
    return row.strip().strip("|").split("|")[0].strip()


#: How the paragraphs this script writes above a section's first part begin.
_OWN_PARAGRAPHS = ("Written by ", "Machine:", "Conditions:", "Kept from the section")
#: The mark on a hand-written paragraph kept from above an earlier run's parts.
HAND_KEPT = "Kept, written by hand of an earlier run: "


def _hand_paragraphs(preamble: str) -> list[str]:
    """The paragraphs above a section's first part that this script did not write, marked once.

    A paragraph in parentheses is a placeholder (``(pending)``, ``(no results found)``): left out.
    """
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", preamble) if p.strip()]
    return [
        p if p.startswith(HAND_KEPT) else HAND_KEPT + p
        for p in paragraphs
        if not p.startswith(_OWN_PARAGRAPHS) and not (p.startswith("(") and p.endswith(")"))
    ]


#: How the paragraph that says where kept notebooks were measured begins, and where its run's
#: own words begin.
KEPT = "Kept from the section as it was, with their targets and claims:"
SAID = "It said of its run:"
_KEPT_PARAGRAPH = re.compile(rf"^{re.escape(KEPT)} (.*?)\. {re.escape(SAID)} (.*)$", re.DOTALL)


def _kept_runs(old_pre: str, kept: list[str]) -> list[tuple[list[str], str]]:
    """Each earlier run the ``kept`` notebooks come from: its notebooks, in ``kept``'s order, and
    the words that describe it.

    The old section's own run (its *Machine* and *Conditions* lines) measured the notebooks that
    no *Kept from* paragraph names; a *Kept from* paragraph carries over with the notebooks of
    its run that are still kept, so each run is described once, with no run nested in another.
    """
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", old_pre) if p.strip()]
    earlier: list[tuple[set[str], str]] = []
    for paragraph in paragraphs:
        if match := _KEPT_PARAGRAPH.match(paragraph):
            names = {n.strip() for n in match.group(1).split(",")}
            earlier.append((names, " ".join(match.group(2).split())))
    named = set().union(*(names for names, _ in earlier))
    own_words = " ".join(
        line.strip()
        for line in old_pre.splitlines()
        if line.startswith(("Machine:", "Conditions:"))
    )
    runs = [({n for n in kept if n not in named}, own_words), *earlier]
    return [([n for n in kept if n in names], said) for names, said in runs if names & set(kept)]


def merge_section(old: str, new: str, ran: set[str]) -> str:
    """The section ``new`` for the notebooks in ``ran``, with what ``old`` held of the rest.

    Kept from ``old``: the parts of notebooks not in ``ran``, their rows of *Targets* and
    *Claims*, and text this script does not write (paragraphs among those tables, parts of
    other names, and paragraphs above the parts, marked as of an earlier run since they may
    speak of it). Where nothing is kept, ``new`` as it is.
    """
    old_pre, old_parts = _parts(old)
    new_pre, new_parts = _parts(new)
    hand = _hand_paragraphs(old_pre)
    kept = [n for h, _ in old_parts if (n := _notebook_of(h)) and n not in ran]
    tables = {"### Targets", "### Claims"}
    old_tables = {h.strip(): _rows_and_text(t) for h, t in old_parts if h.strip() in tables}
    # Parts of other names, unless the run writes them again ("Benchmarks behind ...": this
    # script's own when the run has their JSON).
    new_headings = {h for h, _ in new_parts}
    own = [
        (h, t)
        for h, t in old_parts
        if not _notebook_of(h) and h.strip() not in tables and h not in new_headings
    ]
    notes = "".join(text for _, text in old_tables.values())
    if not kept and not own and not notes and not hand:
        return new
    lines = [new_pre.rstrip("\n"), ""]
    for names, said in _kept_runs(old_pre, kept):
        lines += [f"{KEPT} {', '.join(names)}. {SAID} {said or '(nothing)'}", ""]
    for paragraph in hand:
        lines += [paragraph, ""]
    new_by_book = {_notebook_of(h): (h, t) for h, t in new_parts if _notebook_of(h)}
    old_by_book = {_notebook_of(h): (h, t) for h, t in old_parts if _notebook_of(h)}
    for book in NOTEBOOKS:
        part = new_by_book.get(book) or (old_by_book.get(book) if book not in ran else None)
        if part is not None:
            lines.append(part[0].rstrip("\n"))
            lines.append(part[1].rstrip("\n"))
            lines.append("")
    order = {name: i for i, name in enumerate(NOTEBOOKS)}
    new_tables = {h.strip(): _rows_and_text(t) for h, t in new_parts if h.strip() in tables}
    heads = {
        "### Targets": "| notebook | target | measured | met |\n|---|---|---:|---|\n",
        "### Claims": "| notebook | held | did not hold |\n|---|---:|---|\n",
    }
    for title in ("### Targets", "### Claims"):
        old_rows, old_text = old_tables.get(title, ([], ""))
        new_rows = new_tables.get(title, ([], ""))[0]
        rows = [r for r in old_rows if _row_notebook(r) not in ran] + new_rows
        rows.sort(key=lambda r: order.get(_row_notebook(r), 99))
        if rows or old_text:
            lines += [title, ""]
            if rows:
                lines.append((heads[title] + "".join(rows)).rstrip("\n"))
            if old_text:
                lines += ["", old_text.rstrip("\n")]
            lines.append("")
    for heading, text in [
        *[(h, t) for h, t in new_parts if not _notebook_of(h) and h.strip() not in tables],
        *own,
    ]:
        lines += [heading.rstrip("\n"), text.rstrip("\n"), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results_dir", type=Path, help="folder of <notebook>.json files")
    parser.add_argument("--results-md", type=Path, default=ROOT / "benchmarks" / "RESULTS.md")
    parser.add_argument("--allow-any-mode", action="store_true", help="accept smoke and CPU runs")
    parser.add_argument(
        "--tier",
        help="the tier the notebooks emulated (JUPYTER_GPU_TIER); read from the runs when omitted",
    )
    parser.add_argument(
        "--section",
        help="write a section of this name (e.g. Capstone) instead of the tutorials' section",
    )
    parser.add_argument(
        "--conditions",
        help="how the run was made, when not alone on the GPU (written below the machine line)",
    )
    args = parser.parse_args(argv)
    runs = load(args.results_dir)
    if not runs:
        print(f"no notebook results in {args.results_dir}", file=sys.stderr)
        return 1
    wrong = [r["notebook"] for r in runs if r["machine"]["mode"] != "gpu"]
    if wrong and not args.allow_any_mode:
        print(f"refusing: {', '.join(wrong)} did not run at full size on a GPU", file=sys.stderr)
        return 2
    try:
        gpu, tier = gpu_short_name(runs), emulated_tier(runs, args.tier)
    except ValueError as error:
        print(f"refusing: {error}", file=sys.stderr)
        return 2
    body = render(runs, tier, copies=not args.section and gpu == COPIES_GPU)
    if args.conditions:
        machine_end = body.index("\n\n", body.index("Machine:"))
        body = f"{body[:machine_end]}\n\nConditions: {args.conditions}{body[machine_end:]}"
    body += "\n".join(render_benchmarks(args.results_dir))
    text = args.results_md.read_text() if args.results_md.exists() else "# Measured results\n"
    title = section_title(tier, args.section, gpu)
    before = section_body(text, title)
    if before is not None:
        body = merge_section(before, body, {r["notebook"] for r in runs})
    args.results_md.write_text(replace_section(text, body, title))
    print(f"updated {args.results_md} from {len(runs)} notebook(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
