"""On a real GPU: ``%gpu --watch`` in a real kernel keeps updating while a training cell runs.

    python3 -m pytest -m gpu tests/gpu/test_watch_gpu.py -x -q

The kernel (nbclient, ``python3``) starts a watch at 5 Hz on the nvml backend, then trains a
small MLP on the GPU for about 8 s in one cell. The watch thread must deliver updates during
that cell, and show the GPU busy. Writes ``watch_gpu.json`` to ``$JUPYTER_GPU_OUT`` when set.
"""

from __future__ import annotations

import json

import pytest

from benchmarks.outputs import write_json
from tests.helpers import repo_env
from tests.watch_notebook import run_watch_notebook

pytestmark = pytest.mark.gpu

TRAIN = """
import torch
model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(8)]).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(4096, 4096, device="cuda")
end = time.time() + 8.0
steps = 0
while time.time() < end:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x).float().pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    steps += 1
torch.cuda.synchronize()
"""


def test_watch_updates_while_training_runs() -> None:
    figures = run_watch_notebook(TRAIN, backend="nvml", interval_s=0.2, env=repo_env())
    write_json("watch_gpu.json", figures)
    print(json.dumps({k: v for k, v in figures.items() if k not in ("html", "stored_html")}))
    assert figures["widget_views"] == 1
    during = figures["after"] - figures["before"]
    assert during >= 20, f"only {during} updates during an 8 s cell at 5 Hz"
    assert figures["max_util_pct"] is not None
    assert figures["max_util_pct"] > 50
    assert "util" in figures["html"]
    assert figures["after_off"]["running"] is False
