"""The served OpenAPI document: ``openapi.yaml``, with what is declared elsewhere added.

Two schemas come from their declarations, so that they cannot drift from what is served:
``Config`` (``GET devices``' settings) from ``jupyter_gpu/options.py``, and ``DeviceSample``'s
readings, their ages and the groups of ``stale`` from ``jupyter_gpu/readings/catalog.py``.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from jupyter_gpu.options import config_schema
from jupyter_gpu.readings import DeviceSample, catalog
from jupyter_gpu.sampling.freshness import MIN_STALE_S

OPENAPI_PATH = Path(__file__).with_name("openapi.yaml")
_NULLABLE = {
    "int": "#/components/schemas/NullableInteger",
    "float": "#/components/schemas/NullableNumber",
}
_JSON_TYPE = {"int": "integer", "float": "number"}


def metric_schema(metric: catalog.Metric) -> dict[str, Any]:
    """A reading's JSON Schema: nullable, a percentage from 0 to 100, with its help if any."""
    if metric.unit == "pct":
        schema: dict[str, Any] = {"type": ["number", "null"], "minimum": 0, "maximum": 100}
    elif not metric.help:
        return {"$ref": _NULLABLE[metric.kind]}
    else:
        schema = {"type": [_JSON_TYPE[metric.kind], "null"]}
    if metric.help:
        schema["description"] = metric.help
    return schema


def age_schema(group: catalog.Group) -> dict[str, Any]:
    """The JSON Schema of a group's age field."""
    return {"type": ["number", "null"], "minimum": 0, "description": group.age_help}


def stale_schema(base: dict[str, Any], made: catalog.Layout) -> dict[str, Any]:
    """``stale``: ``base`` (the array) with the groups it may name and what it means."""
    cadences = ", ".join(f"{g.name}: {g.interval_option}" for g in made.groups)
    return {
        **base,
        "items": {"type": "string", "enum": list(made.group_names)},
        "description": (
            f"The groups of readings older than two of their own intervals ({cadences}) and "
            f"than {MIN_STALE_S:g} s, and {made.tick_group.name} for a not_responding GPU. "
            "Their fields are null in this sample (and absent from GET metrics); the age says "
            "how old the last reading is."
        ),
    }


def device_sample_schema(base: dict[str, Any]) -> dict[str, Any]:
    """``DeviceSample``: ``base`` (its own fields) and the catalog's, in the JSON's order."""
    made = catalog.layout()
    own = dict(base["properties"])
    own["stale"] = stale_schema(own["stale"], made)
    declared = {m.field: metric_schema(m) for m in made.metrics}
    declared |= {g.age_field: age_schema(g) for g in made.groups}
    names = DeviceSample.json_names()
    schema = {k: v for k, v in base.items() if k != "properties"}
    schema["required"] = list(names)
    schema["properties"] = {name: declared.get(name) or own[name] for name in names}
    return schema


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document: ``openapi.yaml`` beside this module, with the declared schemas."""
    document: dict[str, Any] = yaml.safe_load(OPENAPI_PATH.read_text(encoding="utf-8"))
    schemas = document["components"]["schemas"]
    schemas["Config"].update(config_schema())
    schemas["DeviceSample"] = device_sample_schema(schemas["DeviceSample"])
    return document


@cache
def openapi_json() -> str:
    """The OpenAPI document as JSON, built once."""
    return json.dumps(openapi_document())
