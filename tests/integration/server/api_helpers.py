"""Helpers for the server API tests: the OpenAPI document, schema checks, the test config."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import jsonschema
from traitlets.config import Config

import jupyter_gpu
from jupyter_gpu.server.openapi import openapi_document

OPENAPI = Path(jupyter_gpu.__file__).parent / "server" / "openapi.yaml"
API = ("jupyter-gpu", "api", "v1")
FAST_INTERVAL_S = 0.1


def openapi() -> dict[str, Any]:
    """The document the server serves (openapi.yaml with the declared options' schema).

    Built afresh at each call, never cached: test_options_declared declares one more option for
    its own tests, and a cached copy made then failed two other tests that the same xdist worker
    ran later (GPU run 22 of 2026-12-02, where the order differed from CI's).
    """
    return openapi_document()


async def open_notebook(jp_fetch: Callable[..., Awaitable[Any]], path: str) -> dict[str, Any]:
    """A session with a ``python3`` kernel for the notebook ``path``: the server's answer."""
    response = await jp_fetch(
        "api",
        "sessions",
        method="POST",
        body=json.dumps({"path": path, "type": "notebook", "kernel": {"name": "python3"}}),
    )
    session: dict[str, Any] = json.loads(response.body)
    return session


def validate(instance: Any, schema_name: str) -> None:
    """Check a response body against a component schema of the API (JSON Schema 2020-12)."""
    schema = {"$ref": f"#/components/schemas/{schema_name}", "components": openapi()["components"]}
    jsonschema.Draft202012Validator(schema).validate(instance)


def gpu_config(extension: str = "jupyter_gpu", **jupyter_gpu_options: Any) -> Config:
    """Server config with the extension (or a test variant of it, by module) and fast options."""
    extensions = {"jupyter_gpu": extension == "jupyter_gpu", extension: True}
    return Config(
        {
            "ServerApp": {"jpserver_extensions": extensions},
            "JupyterGpu": {
                "backend": "simulated",
                "interval_s": FAST_INTERVAL_S,
                "simulated_devices": 3,
                "kernel_map_interval_s": 0.5,
                **jupyter_gpu_options,
            },
        }
    )
