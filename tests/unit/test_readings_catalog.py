"""The readings catalog (``jupyter_gpu/readings/catalog.py``) and what is made from it agree.

Its declarations hold together, name options that exist, and the browser's table
(``labextension/src/readings.generated.ts``) is what the catalog writes today.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from jupyter_gpu.nvml.gpm import GPM_FIELDS
from jupyter_gpu.options import OPTIONS
from jupyter_gpu.readings import catalog
from jupyter_gpu.readings.typescript import GENERATED_PATH, main, typescript
from jupyter_gpu.sampling import SamplerOptions

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_typescript_is_the_catalog() -> None:
    written = (ROOT / GENERATED_PATH).read_text(encoding="utf-8")
    assert written == typescript(), (
        f"{GENERATED_PATH} is stale: run `jlpm generate:readings` "
        "(python -m jupyter_gpu.readings.typescript --write)"
    )


def test_the_check_command_fails_on_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / GENERATED_PATH
    stale.parent.mkdir(parents=True)
    stale.write_text(typescript().replace("'util_pct'", "'util'"), encoding="utf-8")
    assert main(["--check", "--root", str(tmp_path)]) == 1
    assert main(["--write", "--root", str(tmp_path)]) == 0
    assert main(["--check", "--root", str(tmp_path)]) == 0


def test_each_group_names_options_the_sampler_takes() -> None:
    options = {o.name: o for o in OPTIONS}
    sampler = {f.name for f in dataclasses.fields(SamplerOptions)}
    for group in catalog.layout().groups:
        assert options[group.interval_option].kind == "float", group.name
        assert group.interval_option in sampler, group.name
        if group.enabled_by is not None:
            assert options[group.enabled_by].kind == "bool", group.name
            assert group.enabled_by in sampler, group.name
        assert group.tick or group.thread.startswith("jupyter-gpu-"), group.name


def test_nvml_reads_the_gpm_group_field_for_field() -> None:
    assert tuple(m.field for m in catalog.layout().group_metrics["gpm"]) == GPM_FIELDS


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"chart": "nowhere"}, "undeclared chart"),
        ({"long_history": False}, "not in the long history"),
        ({"group": "nvswitch"}, "no declared group"),
        ({"field": "power_draw"}, "no unit in its name"),
        ({"field": "power_limit_w"}, "declared twice"),
    ],
)
def test_declarations_that_do_not_hold_together_are_refused(
    change: dict[str, object], complaint: str
) -> None:
    made = catalog.layout()
    # Like util_pct (charted, in the long history), under a name of its own unless changed.
    bad = dataclasses.replace(made.metrics[0], **{"field": "board_util_pct", **change})
    with pytest.raises(ValueError, match=complaint):
        catalog.check(catalog.Layout(made.groups, (*made.metrics, bad), made.charts))


def test_the_layout_follows_the_declarations(monkeypatch: pytest.MonkeyPatch) -> None:
    before = catalog.layout()
    assert catalog.layout() is before  # made once while the declarations stand
    extra = catalog.Metric("board_temperature_c", "fast")
    monkeypatch.setattr(catalog, "METRICS", (*catalog.METRICS, extra))
    after = catalog.layout()
    assert after is not before
    assert after.metrics[-1] is extra
    assert after.metric_index["board_temperature_c"] == len(after.metrics) - 1
