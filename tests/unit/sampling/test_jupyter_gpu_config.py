"""The ``JupyterGpu`` Configurable: defaults, help on every option, bounds with clear errors."""

from __future__ import annotations

import pytest
from traitlets import TraitError
from traitlets.config import Config

from jupyter_gpu.config import JupyterGpu


def make(**values: object) -> JupyterGpu:
    return JupyterGpu(config=Config({"JupyterGpu": values}))


def test_defaults_match_the_api_document() -> None:
    c = JupyterGpu()
    assert (c.backend, c.interval_s, c.history_s, c.slow_metrics) == ("auto", 1.0, 600.0, False)
    assert (c.slow_interval_s, c.cache_scan_interval_s, c.simulated_devices) == (5.0, 30.0, 2)


def test_every_option_has_help() -> None:
    traits = JupyterGpu.class_traits(config=True)
    assert len(traits) >= 8
    for name, trait in traits.items():
        assert len(trait.help or "") > 20, name


def test_config_values_are_loaded_and_coerced() -> None:
    c = make(backend="simulated", interval_s=0.25, simulated_devices=8, slow_metrics=True)
    assert (c.backend, c.interval_s, c.simulated_devices, c.slow_metrics) == (
        "simulated",
        0.25,
        8,
        True,
    )


def test_the_history_bound_does_not_depend_on_the_order_of_options() -> None:
    c = make(history_s=86_400.0, interval_s=5.0)  # 17,280 samples: fine in either order
    assert (c.history_s, c.interval_s) == (86_400.0, 5.0)
    c = make(interval_s=5.0, history_s=86_400.0)
    assert c.history_s == 86_400.0


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"interval_s": 0.05}, "interval_s.*should not be less than 0.1"),
        ({"interval_s": 0.0}, "interval_s"),
        ({"history_s": -5.0}, "history_s"),
        ({"simulated_devices": 17}, "simulated_devices.*should not be greater than 16"),
        ({"simulated_devices": 0}, "simulated_devices"),
        ({"backend": "cuda"}, "backend.*'auto', 'nvml', 'simulated', 'none'|backend"),
        ({"slow_interval_s": 0.01}, "slow_interval_s"),
        ({"cache_scan_interval_s": 0.5}, "cache_scan_interval_s"),
        (
            {"interval_s": 0.1, "history_s": 7200.0},
            "history_s / JupyterGpu.interval_s must be at most 36,000 samples",
        ),
    ],
)
def test_out_of_bounds_values_raise_a_clear_error(values: dict[str, object], message: str) -> None:
    with pytest.raises(TraitError, match=message):
        make(**values)
