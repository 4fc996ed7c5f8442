"""The declarations of ``jupyter_gpu/options.py`` and every layer made from them agree."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from jupyter_gpu.config import JupyterGpu
from jupyter_gpu.options import OPTIONS, config_schema, sampler_values, settings
from jupyter_gpu.sampling import SamplerOptions
from jupyter_gpu.server.openapi import openapi_json

ROOT = Path(__file__).resolve().parents[2]


def test_each_setting_is_a_trait_and_each_trait_a_setting() -> None:
    traits = JupyterGpu.class_own_traits(config=True)
    assert sorted(traits) == sorted(o.name for o in settings())
    for option in settings():
        trait = traits[option.name]
        assert trait.help == option.help
        assert getattr(trait, "min", None) == option.minimum, option.name
        assert getattr(trait, "max", None) == option.maximum, option.name
        if option.choices:
            assert tuple(trait.values) == option.choices


def test_the_sampler_takes_the_declared_options_under_their_names() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(SamplerOptions)}
    taken = {o.name: o for o in OPTIONS if o.sampler and o.setting}
    assert sorted(fields) == sorted(taken)
    defaults = sampler_values(JupyterGpu())  # metrics_token from the environment is not taken
    assert defaults == {name: fields[name] for name in taken}
    assert SamplerOptions(**defaults) == SamplerOptions()


def test_the_served_schema_is_the_declarations() -> None:
    served = json.loads(openapi_json())["components"]["schemas"]["Config"]
    assert served == config_schema()
    shown = [o for o in OPTIONS if o.api]
    assert list(served["properties"]) == [o.key for o in shown]
    for option in shown:
        prop = served["properties"][option.key]
        assert (prop.get("minimum"), prop.get("maximum")) == (option.minimum, option.maximum)
        assert prop["description"] == option.help


def test_the_frontend_type_lists_what_it_reads() -> None:
    types = (ROOT / "labextension" / "src" / "types.ts").read_text()
    body = re.search(r"export interface IServerConfig \{(.*?)\n\}", types, re.S)
    assert body is not None
    keys = set(re.findall(r"^\s+(\w+)\??:", body.group(1), re.M))
    assert keys == {o.key for o in OPTIONS if o.frontend}
    assert all(o.api for o in OPTIONS if o.frontend)  # it reads them from GET devices
