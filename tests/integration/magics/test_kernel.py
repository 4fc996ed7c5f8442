"""The magics in a real Jupyter kernel (ipykernel over ZMQ, driven by nbclient), on CPU.

The shell tests cover the magics' logic; this one checks what only a kernel shows: ``%amp on``
and its hooks run in the thread that runs the cell (autocast state is per thread), rich outputs
arrive as display messages with their mimetypes, and ``%compile``'s report follows the cell.
"""

from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

from jupyter_gpu.magics.output.render import PLOTLY_MIMETYPE

CELLS = [
    "%load_ext jupyter_gpu\nimport torch",
    "%amp on\n(torch.ones(2, 2) @ torch.ones(2, 2)).dtype",
    "(torch.ones(2, 2) @ torch.ones(2, 2)).dtype",
    "%amp off\n(torch.ones(2, 2) @ torch.ones(2, 2)).dtype",
    "(torch.ones(2, 2) @ torch.ones(2, 2)).dtype",
    "%%profile\nsum(torch.ones(64, 64) @ torch.ones(64, 64) for _ in range(3)).sum()",
    "def f(t):\n    return t.sin() * 2\n%compile f --backend eager",
    "f(torch.ones(3)).shape",
    "%%memsummary\nkept = torch.zeros(256, 256)",
    "%memsummary -n 3",
]


def _texts(cell: nbformat.NotebookNode) -> str:
    parts = []
    for out in cell.outputs:
        parts.append(out.get("text", ""))
        parts.append(out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


@pytest.mark.slow
def test_magics_in_a_real_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the CPU branch, on purpose (the kernel's env)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    cells = nb.cells
    assert "autocast on" in _texts(cells[1])
    assert "torch.bfloat16" in _texts(cells[1])  # from the line of %amp on, in its own cell
    assert "torch.bfloat16" in _texts(cells[2])
    assert "torch.float32" in _texts(cells[3])  # from the line of %amp off
    assert "torch.float32" in _texts(cells[4])
    profile_mimetypes = {m for out in cells[5].outputs for m in out.get("data", {})}
    assert {"text/plain", "text/html", PLOTLY_MIMETYPE} <= profile_mimetypes
    assert "aten::mm" in _texts(cells[5])
    # kineto's start/stop lines, written to the kernel's fd 2, would show as a stream output
    # (of that cell or, forwarded late, of a later one)
    assert not [cell.source for cell in cells if "USDT" in _texts(cell)]
    assert not [cell.source for cell in cells if "profiler_start" in _texts(cell)]
    assert "torch.compile in this cell" in _texts(cells[7])
    assert "torch.Size([3])" in _texts(cells[7])
    assert "cell memory (cpu" in _texts(cells[8])
    assert "kept" in _texts(cells[9])
    for cell in cells:
        assert all(out.output_type != "error" for out in cell.outputs), cell.source
