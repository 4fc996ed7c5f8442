"""An option declared in its one place (``jupyter_gpu/options.py``) reaches every layer.

The test declares one more option (and nothing else), then starts a real Jupyter server: the
option is a trait of ``JupyterGpu`` with its bounds and help, ``GET devices`` reports the value
the server was configured with, and the served OpenAPI document describes it.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator

import pytest
from traitlets import TraitError
from traitlets.config import Config

import jupyter_gpu.config
import jupyter_gpu.server.app
from jupyter_gpu import options
from jupyter_gpu.options import Option
from jupyter_gpu.server import openapi
from tests.integration.server.api_helpers import gpu_config, validate
from tests.integration.server.conftest import Fetch

EXTRA = Option(
    "extra_window_s",
    "float",
    7.5,
    "A test's option: seconds of nothing in particular (1 to 9).",
    minimum=1.0,
    maximum=9.0,
    api=True,
    sampler=False,
)


@pytest.fixture
def declared(monkeypatch: pytest.MonkeyPatch) -> Iterator[type]:
    """``JupyterGpu`` as it is made with ``EXTRA`` declared; everything restored after."""
    monkeypatch.setattr(options, "OPTIONS", (*options.OPTIONS, EXTRA))
    # The module's own name is restored after the reload (which makes a new class).
    monkeypatch.setattr(jupyter_gpu.config, "JupyterGpu", jupyter_gpu.config.JupyterGpu)
    made: type = importlib.reload(jupyter_gpu.config).JupyterGpu
    monkeypatch.setattr(jupyter_gpu.server.app, "JupyterGpu", made)
    openapi.openapi_json.cache_clear()
    yield made
    openapi.openapi_json.cache_clear()


@pytest.fixture
def jp_server_config(declared: type) -> Config:
    return gpu_config(extra_window_s=3.0)


def test_the_trait_has_its_bounds_and_help(declared: type) -> None:
    trait = declared.class_traits(config=True)["extra_window_s"]
    assert (trait.default_value, trait.min, trait.max, trait.help) == (
        7.5,
        1.0,
        9.0,
        EXTRA.help,
    )
    assert declared().extra_window_s == 7.5
    with pytest.raises(TraitError, match="extra_window_s"):
        declared(config=Config({"JupyterGpu": {"extra_window_s": 10.0}}))


async def test_the_api_and_its_schema_show_it(jp_fetch: Fetch) -> None:
    devices = json.loads((await jp_fetch("jupyter-gpu", "api", "v1", "devices")).body)
    assert devices["config"]["extra_window_s"] == 3.0
    served = json.loads((await jp_fetch("jupyter-gpu", "api", "v1", "openapi.json")).body)
    config = served["components"]["schemas"]["Config"]
    assert "extra_window_s" in config["required"]
    assert config["properties"]["extra_window_s"] == {
        "type": "number",
        "minimum": 1.0,
        "maximum": 9.0,
        "description": EXTRA.help,
    }
    validate(devices, "Devices")
