"""The catalog in TypeScript, for the browser: ``labextension/src/readings.generated.ts``.

The frontend reads its metric names, each group's metrics and age field, and how each metric is
charted from that file, so that a reading declared in ``catalog.py`` reaches the sidebar and the
dashboard without a hand-written list. Regenerate it after changing the catalog::

    python -m jupyter_gpu.readings.typescript --write     # or: jlpm generate:readings

``tests/unit/test_readings_catalog.py`` fails while the file differs from what this writes. The
text is written as prettier formats it (``jlpm lint:check`` checks that too).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from jupyter_gpu.readings import catalog

GENERATED_PATH = Path("labextension") / "src" / "readings.generated.ts"
"""Where the file lives, from the repository's root."""
WIDTH = 80
"""prettier's line width."""


def _quote(text: str) -> str:
    """A TypeScript string as prettier writes it (single quotes, unless that needs escapes)."""
    if "'" in text and '"' not in text:
        return json.dumps(text, ensure_ascii=False)
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _union(name: str, doc: str, values: Sequence[str]) -> list[str]:
    """``export type name = 'a' | 'b';``: on one line, else on the next, else one member a line."""
    quoted = [_quote(v) for v in values]
    one = f"export type {name} = {' | '.join(quoted)};"
    lines = [f"/** {doc} */"]
    if len(one) <= WIDTH:
        return [*lines, one]
    below = f"  {' | '.join(quoted)};"
    if len(below) <= WIDTH:
        return [*lines, f"export type {name} =", below]
    return [
        *lines,
        f"export type {name} =",
        *(f"  | {q}" for q in quoted[:-1]),
        f"  | {quoted[-1]};",
    ]


def _commas(lines: list[str]) -> list[str]:
    """``lines`` with the last one's trailing comma dropped (prettier's ``trailingComma: none``)."""
    return [*lines[:-1], lines[-1].rstrip(",")] if lines else lines


def _array(head: str, items: Sequence[str], tail: str, indent: str = "") -> list[str]:
    """``head[a, b]tail`` on one line where it fits, else one item a line."""
    one = f"{indent}{head}[{', '.join(items)}]{tail}"
    if len(one) <= WIDTH:
        return [one]
    body = _commas([f"{indent}  {item}," for item in items])
    return [f"{indent}{head}[", *body, f"{indent}]{tail}"]


def _object(head: str, entries: Iterable[tuple[str, str]]) -> list[str]:
    """``head{ key: value, ... };`` with one entry a line.

    A value that does not fit goes on the next line, unless its key is short (prettier keeps
    a key of fewer than 5 characters, its tab width and 3, beside its value).
    """
    body: list[str] = []
    for key, value in entries:
        line = f"  {key}: {value},"
        if len(line) - 1 > WIDTH and len(key) >= 5:
            body += [f"  {key}:", f"    {value},"]
        else:
            body.append(line)
    return [f"{head}{{", *_commas(body), "};"]


def _metric(metric: catalog.Metric) -> list[str]:
    fields = [
        ("name", _quote(metric.field)),
        ("group", _quote(metric.group)),
        ("unit", _quote(metric.unit)),
        ("chart", _quote(metric.chart) if metric.chart else "null"),
        ("label", _quote(metric.label)),
        ("cardLabel", _quote(metric.card_label) if metric.card_label else "null"),
    ]
    return ["  {", *_commas([f"    {key}: {value}," for key, value in fields]), "  },"]


def typescript(layout: catalog.Layout | None = None) -> str:
    """The text of ``readings.generated.ts`` for ``layout`` (default: the catalog as declared)."""
    made = layout if layout is not None else catalog.layout()
    groups = [g.name for g in made.groups]
    metrics = [m.field for m in made.metrics]
    lines = [
        "// Generated from jupyter_gpu/readings/catalog.py: do not edit. Regenerate it with",
        "// `jlpm generate:readings` (python -m jupyter_gpu.readings.typescript --write);",
        "// tests/unit/test_readings_catalog.py fails while it is stale.",
        "",
        *_union("ReadingGroup", "A group of readings, read on a cadence of its own.", groups),
        "",
        *_union("MetricName", "A reading of a GPU: its one name, in the API too.", metrics),
        "",
        *_union("AgeField", "A group's age field in the API.", [g.age_field for g in made.groups]),
        "",
        *_union("ChartId", "A chart of the dashboard's rows.", [c.id for c in made.charts]),
        "",
        *_union("Unit", "The unit a reading's name ends in.", list(catalog.UNITS)),
        "",
        "/**",
        " * A GPU's readings and its groups' ages, in a sample (null: not read). The tick's",
        " * readings are in every sample; the others and the ages may be absent (older servers).",
        " */",
        "export interface IDeviceReadings {",
        *(
            f"  {m.field}{'' if m.group == made.tick_group.name else '?'}: number | null;"
            for m in made.metrics
        ),
        *(f"  {g.age_field}?: number | null;" for g in made.groups),
        "}",
        "",
        "/** One reading: how the browser shows it. */",
        "export interface IMetricSpec {",
        "  /** Its field in the API: the one name on the server and here. */",
        "  readonly name: MetricName;",
        "  readonly group: ReadingGroup;",
        "  readonly unit: Unit;",
        "  /** The dashboard chart that draws it (kept in the client's buffer then), or null. */",
        "  readonly chart: ChartId | null;",
        "  /** Its name in a chart's legend and the hover line. */",
        "  readonly label: string;",
        "  /** Its name on its group's line of a GPU's card, or null (not on it). */",
        "  readonly cardLabel: string | null;",
        "}",
        "",
        "/** Every reading, in the API's order. */",
        "export const METRICS: readonly IMetricSpec[] = [",
        *[line for m in made.metrics for line in _metric(m)][:-1],
        "  }",
        "];",
        "",
        "/** The groups, in the API's order. */",
        *_array(
            "export const READING_GROUPS: readonly ReadingGroup[] = ",
            [_quote(g) for g in groups],
            ";",
        ),
        "",
        "/** The group the server's tick reads: its processes and the GPU's state come with it. */",
        f"export const TICK_GROUP: ReadingGroup = {_quote(made.tick_group.name)};",
        "",
        "/** Each group's readings. */",
    ]
    lines += [
        "export const GROUP_METRICS: {",
        "  readonly [group in ReadingGroup]: readonly MetricName[];",
        "} = {",
    ]
    for i, group in enumerate(made.groups):
        comma = "," if i < len(made.groups) - 1 else ""
        names = [_quote(m.field) for m in made.group_metrics[group.name]]
        lines += _array(f"{group.name}: ", names, comma, indent="  ")
    lines.append("};")
    lines += [
        "",
        "/** Each group's age field. */",
        *_object(
            "export const AGE_FIELDS: { readonly [group in ReadingGroup]: AgeField } = ",
            ((g.name, _quote(g.age_field)) for g in made.groups),
        ),
        "",
        "/** What each group's line on a GPU's card means (its tooltip; '' for none). */",
        *_object(
            "export const GROUP_HELP: { readonly [group in ReadingGroup]: string } = ",
            ((g.name, _quote(g.card_help)) for g in made.groups),
        ),
        "",
        "/** A chart of a dashboard row. */",
        "export interface IChartSpec {",
        "  readonly id: ChartId;",
        "  readonly title: string;",
        "}",
        "",
        "/** The charts of a dashboard row, in order. */",
        "export const CHARTS: readonly IChartSpec[] = [",
    ]
    for i, chart in enumerate(made.charts):
        comma = "," if i < len(made.charts) - 1 else ""
        lines.append(f"  {{ id: {_quote(chart.id)}, title: {_quote(chart.title)} }}{comma}")
    lines.append("];")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Print the file, or write it into the source tree (``--write``), or check it (``--check``).

    Returns the exit status: 1 when ``--check`` finds the file stale.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {GENERATED_PATH}")
    parser.add_argument("--check", action="store_true", help=f"check {GENERATED_PATH}")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the repository's root")
    args = parser.parse_args(argv)
    text = typescript()
    path = args.root / GENERATED_PATH
    if args.write:
        path.write_text(text, encoding="utf-8")
        sys.stdout.write(f"wrote {path}\n")
        return 0
    if args.check:
        stale = not path.exists() or path.read_text(encoding="utf-8") != text
        if stale:
            sys.stdout.write(f"{path} is stale: run jlpm generate:readings\n")
        return 1 if stale else 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
