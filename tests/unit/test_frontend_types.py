"""The browser's types of the server's records (``labextension/src/types.ts``) are the API's.

Every interface that mirrors a schema of the served OpenAPI document is held to it whole: the
same keys (the readings of ``IDeviceSample`` come from the generated ``IDeviceReadings``), each
of the same kind (number, string, boolean, array, object), and nullable wherever the server
may send ``null``. The browser may be more careful than the server (an optional key, a
``| null`` the server never sends), never less.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpu.options import OPTIONS
from jupyter_gpu.server.openapi import openapi_document

SRC = Path(__file__).resolve().parents[2] / "labextension" / "src"
FILES = ("types.ts", "readings.generated.ts")

# interface -> (how to find its schema in components.schemas, keys the browser adds)
MIRRORS: dict[str, tuple[tuple[str, ...], set[str]]] = {
    "IDeviceInfo": (("DeviceInfo",), set()),
    "IMigInfo": (("DeviceInfo", "properties", "mig", "oneOf", "1"), set()),
    "IDevicesInfo": (("Devices",), set()),
    "IGpuProcess": (("Process",), set()),
    "IDeviceSample": (("DeviceSample",), set()),
    "IHostSample": (("Host",), set()),
    "ICompileCacheSample": (("CompileCache",), set()),
    "ICacheDir": (("CacheDir",), set()),
    "ICacheCleared": (("CacheCleared",), set()),
    # A snapshot's and a stream message's sample say how old it is (Snapshot, StreamMessage).
    "ISample": (("Sample",), {"age_s"}),
    "IHistory": (("History",), set()),
    "IHistoryColumns": (("HistoryColumns",), set()),
    "IColumnStats": (("HistoryColumns", "properties", "series", "additionalProperties"), set()),
}


def interfaces() -> dict[str, dict[str, tuple[bool, str]]]:
    """Each exported interface: member -> (optional, its type's text), bases' members included."""
    found: dict[str, dict[str, tuple[bool, str]]] = {}
    bases: dict[str, list[str]] = {}
    for name in FILES:
        text = (SRC / name).read_text(encoding="utf-8")
        pattern = r"^export interface (\w+)(?: extends ([\w, ]+))? \{\n(.*?)^\}"
        for match in re.finditer(pattern, text, re.M | re.S):
            body = re.sub(r"/\*.*?\*/", "", match.group(3), flags=re.S)
            members = re.findall(r"^  (?:readonly )?(\w+)(\??): (.+);$", body, re.M)
            found[match.group(1)] = {m: (opt == "?", kind) for m, opt, kind in members}
            bases[match.group(1)] = [b.strip() for b in (match.group(2) or "").split(",") if b]
    for name, extends in bases.items():
        for base in extends:
            found[name] = {**found[base], **found[name]}
    return found


@functools.cache
def schemas() -> dict[str, Any]:
    """The served document's schemas, built once: kind_of reads them at every property, and
    building the document each time made these tests 19 s of CPU instead of 2."""
    found: dict[str, Any] = openapi_document()["components"]["schemas"]
    return found


def schema_at(path: tuple[str, ...]) -> dict[str, Any]:
    node: Any = schemas()
    for step in path:
        node = node[int(step)] if isinstance(node, list) else node[step]
    assert isinstance(node, dict)
    return node


def kind_of(schema: dict[str, Any]) -> tuple[str, bool]:
    """A property's kind (number, string, boolean, array, object) and whether it may be null."""
    refs = schemas()
    if "$ref" in schema:
        target = refs[schema["$ref"].rsplit("/", 1)[1]]
        return kind_of({**target, **{k: v for k, v in schema.items() if k != "$ref"}})
    if "oneOf" in schema:
        kinds = [kind_of(s) for s in schema["oneOf"]]
        real = [k for k, _ in kinds if k != "null"]
        return real[0], any(k == "null" or n for k, n in kinds)
    if "const" in schema:
        return type(schema["const"]).__name__.replace("str", "string"), False
    if "enum" in schema and "type" not in schema:
        return "string", False
    types = schema.get("type", "object")
    names = [types] if isinstance(types, str) else list(types)
    real = [t for t in names if t != "null"] or ["null"]
    kind = {"integer": "number"}.get(real[0], real[0])
    return kind, "null" in names


def ts_kind(text: str) -> tuple[str, bool]:
    """A TypeScript type's kind and whether it admits null (a union at the top level)."""
    parts = [p.strip() for p in re.split(r"\|(?![^{(]*[})])", text)]
    real = [p for p in parts if p != "null"]
    first = real[0]
    if first.endswith("[]"):
        kind = "array"
    elif first.startswith(("{", "I")):
        kind = "object"
    elif first.startswith("'") or first == "string":
        kind = "string"
    else:
        kind = first
    return kind, len(real) < len(parts)


@pytest.mark.parametrize("name", sorted(MIRRORS))
def test_the_interface_is_its_schema_whole(name: str) -> None:
    path, added = MIRRORS[name]
    members = interfaces()[name]
    schema = schema_at(path)
    assert set(members) - added == set(schema["properties"]), name
    for key, prop in schema["properties"].items():
        kind, nullable = kind_of(prop)
        ts, ts_nullable = ts_kind(members[key][1])
        assert ts == kind, f"{name}.{key}: {members[key][1]} is not a {kind}"
        assert ts_nullable or not nullable, f"{name}.{key}: the server may send null"


def test_the_server_config_type_is_the_options_the_frontend_reads() -> None:
    members = interfaces()["IServerConfig"]
    schema = schema_at(("Config",))
    assert set(members) == {o.key for o in OPTIONS if o.frontend}
    for key, (_, text) in members.items():
        assert ts_kind(text)[0] == kind_of(schema["properties"][key])[0], key


def test_the_check_sees_a_drift() -> None:
    """A key the server sends that the browser does not declare is found (and a wrong kind)."""
    members = interfaces()["IDeviceSample"]
    assert "util_pct" in members  # from the generated IDeviceReadings
    assert ts_kind("number | null") == ("number", True)
    assert ts_kind("{ [field: string]: string } | null") == ("object", True)
    assert ts_kind("('fast' | 'gpm' | string)[] | null") == ("array", True)
    assert kind_of({"$ref": "#/components/schemas/NullableInteger"}) == ("number", True)
